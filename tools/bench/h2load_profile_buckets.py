#!/usr/bin/env python3
"""Server CPU per call by bucket, Health/Check beside LookupRoute (tools/bench/h2load_profile.sh).

Usage: h2load_profile_buckets.py HEALTH.script HEALTH_US_PER_CALL LOOKUP.script LOOKUP_US_PER_CALL

Each *.script is `perf script -F comm,tid,ip,sym,dso` of `perf record -g` over one phase; the
µs per call is that phase's server CPU per call measured without perf. A sample goes to the
first rule that matches (the order below): kernel samples by the kind of kernel work, the
malloc family and memcpy by their leaf, then the innermost known component on the stack
(protobuf arena frames match nothing themselves, so an arena allocation counts for the parse,
the translation or the serialisation that asked for it).
"""
import collections
import re
import sys

KERNEL_KINDS = [  # (bucket, any kernel frame matching)
    ("kernel: send (tcp_sendmsg, loopback xmit)", r"tcp_sendmsg|sendmsg|__dev_queue_xmit|loopback_xmit"),
    ("kernel: receive (tcp_recvmsg, softirq rx)", r"tcp_recvmsg|recvmsg|tcp_v4_rcv|net_rx_action|__netif_receive"),
    ("kernel: futex, wake-ups, scheduling", r"futex|try_to_wake_up|schedule|ttwu|finish_task_switch|wake_up"),
    ("kernel: epoll", r"epoll|ep_poll|do_epoll"),
    ("kernel: other syscalls / entry", r"."),
]
MALLOC = re.compile(r"^(malloc|free|cfree|_int_malloc|_int_free|malloc_consolidate|__libc_malloc|"
                    r"__libc_free|tcache|_int_realloc|realloc|__libc_calloc|calloc|"
                    r"operator new|operator delete|unlink_chunk|alloc_perturb|__posix_memalign|"
                    r"_mid_memalign|aligned_alloc|sysmalloc)")
MEMCPY = re.compile(r"^(__memmove|__memcpy|memmove|memcpy|__memset|memset)")
COMPONENTS = [  # innermost frame matching wins (checked frame by frame from the leaf)
    ("index decision (ic::index, ic::state)", r"ic::index::|ic::state::"),
    ("response serialize (protobuf)", r"_InternalSerialize|SerializeWithCachedSizes|ByteSizeLong|"
                                      r"SerializeToArray|SerializePartial|GenericSerialize|SerializationTraits.*Serialize"),
    ("request parse (protobuf)", r"_InternalParse|ParseFrom|MergeFrom|ParseContext|InlineGreedyStringParser|"
                                 r"GenericDeserialize|SerializationTraits.*Deserialize|ReadPackedVarint|"
                                 r"EpsCopyInputStream|ParseLoop"),
    ("metrics (prometheus, series cache)", r"prometheus::|series_cache|gateway_probe|on_lookup|metrics_probe"),
    ("message pool (reset / clear between calls)", r"lookup_message_pool"),
    ("our handler, translate, runtime", r"ic::"),
    ("CAF", r"caf::"),
    ("gRPC: chttp2 read + HPACK parse", r"perform_read|read_action|HPackParser|hpack_parser|"
                                        r"grpc_chttp2_perform|chttp2.*[Rr]ead|ReadAction|continue_read"),
    ("gRPC: chttp2 write + HPACK encode", r"write_action|begin_write|end_write|HPackCompressor|hpack_enc|"
                                          r"chttp2.*[Ww]rite|WriteAction|tcp_flush|tcp_write"),
    ("gRPC: callback server / call / CQ", r"CallbackRequest|ServerCallbackUnary|CallbackUnaryHandler|"
                                          r"grpc_call|FilterStack|ServerCall|CompletionQueue|cq_|"
                                          r"grpc_completion|ServerContext|CallOpSet|BatchControl"),
]
KERNEL_RE = [(n, re.compile(p)) for n, p in KERNEL_KINDS]
COMP_RE = [(n, re.compile(p)) for n, p in COMPONENTS]


def samples(path):
    frames = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if frames:
                    yield frames
                frames = []
                continue
            if line[0] not in " \t":
                if frames:
                    yield frames
                frames = []
                continue
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
            if m:
                sym, dso = m.group(1), m.group(2)
                sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
                frames.append((sym, dso))
    if frames:
        yield frames


def dso_name(dso):
    d = dso.rsplit("/", 1)[-1]
    if "kernel" in d:
        return "kernel"
    return re.sub(r"\.so.*$", "", d)


def component(frames):
    for sym, _ in frames:
        for name, rx in COMP_RE:
            if rx.search(sym):
                return name
    return None


def bucket(frames):
    leaf_sym, leaf_dso = frames[0]
    if "kernel" in leaf_dso:
        syms = " ".join(s for s, d in frames if "kernel" in d)
        for name, rx in KERNEL_RE:
            if rx.search(syms):
                return name
    if MALLOC.search(leaf_sym):
        return "malloc/free (leaf), called from: " + (component(frames[1:]) or "gRPC other")
    if MEMCPY.search(leaf_sym):
        return "memcpy/memset (leaf), called from: " + (component(frames[1:]) or "gRPC other")
    c = component(frames)
    if c:
        return c
    return "gRPC/absl/libc other (" + dso_name(leaf_dso) + ")"


def analyse(path):
    buckets = collections.Counter()
    leaves = collections.Counter()
    total = 0
    for fr in samples(path):
        total += 1
        buckets[bucket(fr)] += 1
        leaves[(fr[0][0], dso_name(fr[0][1]))] += 1
    return total, buckets, leaves


def main():
    h_path, h_us, l_path, l_us = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    ht, hb, hl = analyse(h_path)
    lt, lb, ll = analyse(l_path)
    print(f"samples: Health/Check {ht}, LookupRoute {lt}; server CPU per call (no perf): "
          f"{h_us:.1f} / {l_us:.1f} us")
    print(f"| bucket | Health/Check us/call | LookupRoute us/call | difference |")
    print("|---|---|---|---|")
    names = sorted(set(hb) | set(lb), key=lambda n: -(lb[n] / lt * l_us - hb[n] / ht * h_us))
    for n in names:
        h = hb[n] / ht * h_us
        l = lb[n] / lt * l_us
        if max(h, l) < 0.3:
            continue
        print(f"| {n} | {h:.1f} | {l:.1f} | {l - h:+.1f} |")
    print(f"| total | {h_us:.1f} | {l_us:.1f} | {l_us - h_us:+.1f} |")
    print()
    print("top leaf symbols by difference (us/call):")
    keys = set(hl) | set(ll)
    rows = sorted(keys, key=lambda k: -(ll[k] / lt * l_us - hl[k] / ht * h_us))
    for k in rows[:30]:
        h = hl[k] / ht * h_us
        l = ll[k] / lt * l_us
        print(f"  {l - h:+6.2f}  H {h:5.2f}  L {l:5.2f}  {k[0][:90]} [{k[1]}]")


if __name__ == "__main__":
    main()
