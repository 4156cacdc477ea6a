#!/usr/bin/python3
"""topo_proof.py: the measuring half of bench/algorithms/topo_proof.sh (which builds the
namespaces, caps the uplinks and cleans up; run that, not this). For every placement (node by node,
round-robin), algorithm and size it runs allreduce_bench across the namespace "nodes",
reads each node's uplink counters before and after, and sets the payload that crossed
every uplink and the time against coll-sim's timing mode for the same algorithm,
ranks, ranks per node and placement. Standard library only.

Bytes: the uplink veth counts every packet's bytes, headers included. Payload =
tx_bytes - H x tx_packets, H measured by the calibration (a known transfer; 66 =
Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12). Store, rendezvous, connection set-up,
the bench's 4-byte line-up all-reduces and max-over-ranks are removed by subtracting a
baseline run of the same algorithm, placement and iteration counts at a 32-byte size;
what is left is calls x (coll-sim bytes at S - coll-sim bytes at 32 B) plus tcp's
16-byte frame per message piece (counted from coll-sim's transfers)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BASE_BYTES = 32
FRAME = 16  # tcp_frame_t, once per message and stream carrying a piece of it
PIECE = 512 << 10  # COLL_TCP_PIECE_BYTES' default


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    if not m:
        raise argparse.ArgumentTypeError("bad size " + s)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def fmt_size(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def iters_for(size):
    """(warm-up, timed) iterations: fewer at large sizes (a 64 MiB call takes seconds)."""
    if size <= 4 << 20:
        return 1, 2
    return 0, 1


class Net:
    def __init__(self, ns, addrs):
        self.ns, self.addrs = ns, addrs

    def counters(self):
        out = []
        for n in self.ns:
            r = subprocess.run(
                ["ip", "netns", "exec", n, "sh", "-c",
                 "cd /sys/class/net/uplink/statistics && cat tx_bytes tx_packets rx_bytes rx_packets"
                 " && cat /proc/net/snmp"],
                capture_output=True, text=True, check=True)
            lines = r.stdout.split("\n")
            vals = [int(x) for x in lines[:4]]
            # TCP segments this node's stack sent again (a resend puts payload twice on
            # the counters): Tcp's RetransSegs in /proc/net/snmp, per namespace.
            tcp = [l.split() for l in lines[4:] if l.startswith("Tcp:")]
            vals.append(int(tcp[1][tcp[0].index("RetransSegs")]))
            out.append(vals)
        return out


class Runner:
    def __init__(self, args, net):
        self.a, self.net = args, net
        self.port = args.port
        self.nnodes = len(net.ns)
        self.k = args.ranks_per_node
        self.n = self.nnodes * self.k
        self.logdir = os.path.join(args.out, "logs")
        os.makedirs(self.logdir, exist_ok=True)

    def node_of(self, placement, r):
        return r // self.k if placement == "node" else r % self.nnodes

    def hosts(self, placement):
        return [self.node_of(placement, r) for r in range(self.n)]

    def env(self):
        e = {k: v for k, v in os.environ.items()
             if k not in ("MASTER_ADDR", "MASTER_PORT", "COLL_HOST_ID", "RANK", "WORLD_SIZE",
                          "COLL_ALGO", "COLL_TRANSPORT", "COLL_STORE_HOSTED")}
        # Each node's 2 ranks see 2 CPUs and think them their own, but the 4 nodes share
        # this machine's CPUs: libcoll's 10 ms poll (meant for ranks that own their cores)
        # would have 8 ranks spin on 2 CPUs. A node's own CPUs are what a real cluster has;
        # here waits sleep after 5 us, as libcoll does for crowded ranks.
        e.update(COLL_DEBUG="INFO", COLL_SPIN_US=str(self.a.spin_us), COLL_PURE_SPIN_US="1",
                 COLL_TIMEOUT_MS="300000")
        if self.a.transport:
            e["COLL_TRANSPORT"] = self.a.transport
        return e

    def run(self, placement, algo, size, warm, iters, tag):
        """One allreduce_bench job; returns (result json or None, log path, counters delta)."""
        self.port = self.port + 1 if self.port < self.a.port + 2000 else self.a.port
        port = str(self.port)
        log = os.path.join(self.logdir, tag + ".log")
        jsn = os.path.join(self.logdir, tag + ".json")
        if os.path.exists(jsn):
            os.unlink(jsn)
        bench = [self.a.bench, "-c", "0", "-b", str(size), "-e", str(size), "-w", str(warm),
                 "-n", str(iters), "-A", algo, "--json", jsn]
        nice = ["nice", "-n", str(self.a.nice)] if self.a.nice else []
        env = self.env()
        procs = []
        before = self.net.counters()
        t0 = time.monotonic()
        with open(log, "w") as f:
            if placement == "node":
                # collrun numbers ranks node by node: RANK = node_rank x N + LOCAL_RANK.
                for k, ns in enumerate(self.net.ns):
                    procs.append(subprocess.Popen(
                        ["ip", "netns", "exec", ns] + nice +
                        [self.a.collrun, "-n", str(self.k), "--nnodes", str(self.nnodes),
                         "--node-rank", str(k), "--master-addr", self.net.addrs[0],
                         "--master-port", port, "--bind", "none", "--timeout",
                         str(self.a.cell_timeout)] + bench,
                        stdout=f, stderr=subprocess.STDOUT, env=env))
            else:
                # collrun cannot place round-robin: rank r started in node r mod nodes,
                # rank 0 hosting the store (no launcher does).
                for r in range(self.n):
                    ns = self.net.ns[self.node_of(placement, r)]
                    e = dict(env, RANK=str(r), WORLD_SIZE=str(self.n),
                             LOCAL_RANK=str(r // self.nnodes), LOCAL_WORLD_SIZE=str(self.k),
                             MASTER_ADDR=self.net.addrs[0], MASTER_PORT=port)
                    procs.append(subprocess.Popen(
                        ["ip", "netns", "exec", ns] + nice +
                        ["timeout", str(self.a.cell_timeout)] + bench,
                        stdout=f, stderr=subprocess.STDOUT, env=e))
            rcs = [p.wait() for p in procs]
        wall = time.monotonic() - t0
        after = self.net.counters()
        delta = [[a - b for a, b in zip(x, y)] for x, y in zip(after, before)]
        res = None
        if all(rc == 0 for rc in rcs) and os.path.exists(jsn):
            with open(jsn) as f:
                res = json.load(f)
        return res, log, delta, wall, rcs


def chosen_algo(log, size):
    """The algorithm libcoll's INFO line names for the size's float32 calls (auto cells)."""
    count = size // 4
    pat = re.compile(r"coll_all_reduce(?:_async)?: %d x float32 sum, algo (\w+)" % count)
    with open(log, errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                return m.group(1)
    return None


class Sim:
    def __init__(self, args, cal, nnodes, k):
        self.a, self.cal, self.nnodes, self.k = args, cal, nnodes, k
        self.cache = {}

    def timing(self, algo, placement, size):
        key = ("t", algo, placement, size)
        if key not in self.cache:
            c = self.cal
            cmd = [self.a.collsim, algo, "-n", str(self.nnodes * self.k), "--bytes", str(size),
                   "--ranks-per-node", str(self.k), "--uplink-bw", "%.6g" % (c["uplink_bw"] / 1e9),
                   "--uplink-lat", "%.3f" % (c["uplink_lat"] * 1e6),
                   "--intra-bw", "%.6g" % (c["intra_bw"] / 1e9),
                   "--intra-lat", "%.3f" % (c["intra_lat"] * 1e6),
                   "--msg-lat", "%.3f" % self.a.msg_lat, "--json"]
            if placement == "rr":
                cmd.append("--round-robin")
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            self.cache[key] = json.loads(r.stdout)
        return self.cache[key]

    def frames(self, algo, hosts, size):
        """Per node: tcp frames (16 B each) leaving and entering its uplink, from coll-sim's
        step mode transfers (one message per transfer, one frame per 512 KiB piece)."""
        key = ("f", algo, tuple(hosts), size)
        if key not in self.cache:
            cmd = [self.a.collsim, algo, "-n", str(len(hosts)), "--bytes", str(size),
                   "--hosts", ",".join(map(str, hosts)), "--json"]
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            d = json.loads(r.stdout)
            esize = 4
            out_f = [0] * self.nnodes
            in_f = [0] * self.nnodes
            link = [0] * self.nnodes
            for t in d["transfers"]:
                s, dst = hosts[t["src"]], hosts[t["dst"]]
                if s == dst:
                    continue
                nb = t["count"] * esize
                pieces = max(1, -(-nb // PIECE))
                out_f[s] += pieces
                in_f[dst] += pieces
                link[s] += nb
            self.cache[key] = (out_f, in_f, link)
        return self.cache[key]


SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
mode = sys.argv[2]
if mode == "sink":
    n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
    c.sendall(b"k")
else:
    while True:
        b = c.recv(1)
        if not b: break
        c.sendall(b)
"""

CLIENT = r"""
import socket, sys, time, statistics
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
mode = sys.argv[3]
if mode == "sink":
    total = int(sys.argv[4]); d = b"x" * (1 << 20); t = time.monotonic()
    for _ in range(total >> 20): c.sendall(d)
    c.shutdown(socket.SHUT_WR); c.recv(1); print(time.monotonic() - t)
else:
    rtt = []
    for _ in range(int(sys.argv[4])):
        t = time.monotonic(); c.sendall(b"p"); c.recv(1); rtt.append(time.monotonic() - t)
    print(statistics.median(rtt))
"""


def calibrate(a, net, out_path):
    """Header bytes per packet, payload rate and one-way latency across two uplinks, a
    node's intra-node (shm) latency and bandwidth: the constants coll-sim is given."""
    cal = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLL_", "MASTER_"))}

    def pair(mode, arg, port):
        srv = subprocess.Popen(["ip", "netns", "exec", net.ns[1], sys.executable, "-c", SERVER,
                                str(port), mode], stdout=subprocess.PIPE, text=True)
        srv.stdout.readline()
        before = net.counters()
        r = subprocess.run(["ip", "netns", "exec", net.ns[0], sys.executable, "-c", CLIENT,
                            net.addrs[1], str(port), mode, str(arg)],
                           capture_output=True, text=True, check=True)
        srv.wait()
        after = net.counters()
        return float(r.stdout), [x - y for x, y in zip(after[0], before[0])]

    total = 16 << 20
    secs, d = pair("sink", total, a.port - 10)
    # Data packets carry the payload; the SYN, FIN and the reply byte are a few packets.
    cal["header_bytes"] = round((d[0] - total) / d[1])
    cal["header_check"] = dict(tx_bytes=d[0], tx_packets=d[1], payload=total,
                               per_packet=(d[0] - total) / d[1])
    cal["one_stream_payload_Bps"] = total / secs
    mss = a.mtu - 52  # IPv4 20 + TCP 20 + timestamps 12
    cal["uplink_bw"] = a.rate_mbit * 1e6 / 8 * mss / (mss + cal["header_bytes"])
    rtt, _ = pair("echo", 400, a.port - 9)
    cal["uplink_lat"] = rtt / 2
    # Intra-node: two ranks of node 0 over shm, ring, a tiny size and 16 MiB.
    e = dict(env, COLL_SPIN_US=str(a.spin_us), COLL_PURE_SPIN_US="1")
    jsn = os.path.join(a.out, "calibrate-intra.json")
    subprocess.run(["ip", "netns", "exec", net.ns[0], a.collrun, "-n", str(a.ranks_per_node),
                    "--bind", "none", a.bench, "-c", "0", "-b", "32", "-e", "16M", "-f",
                    str(1 << 19), "-w", "3", "-n", "20", "-A", "ring", "--json", jsn],
                   capture_output=True, text=True, env=e, check=True)
    with open(jsn) as f:
        res = json.load(f)["results"]
    t_small = min(res[0]["out_of_place"]["time_us"], res[0]["in_place"]["time_us"]) * 1e-6
    t_big = min(res[-1]["out_of_place"]["time_us"], res[-1]["in_place"]["time_us"]) * 1e-6
    k = a.ranks_per_node
    rounds = 2 * (k - 1)  # the ring on k ranks at a tiny size
    cal["intra_lat"] = max(t_small / rounds - a.msg_lat * 1e-6, 1e-7)
    # A rank's port sends 2 (k-1)/k x S in the ring.
    cal["intra_bw"] = 2 * (k - 1) / k * res[-1]["size"] / t_big
    cal["intra_raw"] = dict(small_s=t_small, big_s=t_big, big_bytes=res[-1]["size"])
    with open(out_path, "w") as f:
        json.dump(cal, f, indent=1)
    print("topo_proof: calibration: %d header bytes per packet; uplink payload %.2f MB/s "
          "(one stream measured %.2f MB/s); uplink latency %.1f us (half a TCP round trip "
          "node 0 - node 1); intra-node %.1f us, %.2f GB/s (2 ranks over shm, ring)"
          % (cal["header_bytes"], cal["uplink_bw"] / 1e6, cal["one_stream_payload_Bps"] / 1e6,
             cal["uplink_lat"] * 1e6, cal["intra_lat"] * 1e6, cal["intra_bw"] / 1e9), flush=True)
    return cal


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--rate-mbit", type=float, required=True)
    p.add_argument("--algos", default="ring,tree,hd,ring_nodes,two_level,auto")
    p.add_argument("--sizes", default="64K,256K,1M,4M,16M,64M")
    p.add_argument("--placements", default="node,rr")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--port", type=int, default=29700)
    p.add_argument("--spin-us", type=int, default=5)
    p.add_argument("--nice", type=int, default=-10)
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--transport", default="", help="COLL_TRANSPORT of the ranks (default: unset)")
    p.add_argument("--msg-lat", type=float, default=1.0, help="coll-sim --msg-lat, us")
    p.add_argument("--cell-timeout", type=int, default=240)
    a = p.parse_args()
    a.bench = os.path.join(a.build, "bench", "allreduce_bench")
    a.collrun = os.path.join(a.build, "tools", "collrun")
    a.collsim = os.path.join(a.build, "tools", "coll-sim")
    net = Net(os.environ["TOPO_NS"].split(), os.environ["TOPO_ADDR"].split())
    cal = calibrate(a, net, os.path.join(a.out, "calibration.json"))
    hdr = cal["header_bytes"]
    run = Runner(a, net)
    sim = Sim(a, cal, run.nnodes, run.k)
    algos = a.algos.split(",")
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    placements = a.placements.split(",")
    raw_path = os.path.join(a.out, "topo_proof_raw.csv")
    raw = open(raw_path, "w")
    raw.write("round,placement,algo,size,warmup,iters,oop_us,ip_us,chosen,wall_s,"
              + ",".join("n%d_tx_bytes,n%d_tx_pkts,n%d_rx_bytes,n%d_rx_pkts,n%d_retrans" % (i, i, i, i, i)
                         for i in range(run.nnodes)) + "\n")
    samples = {}  # (placement, algo, size) -> [time_s...]
    payload = {}  # (placement, algo, size) -> [(egress list, ingress list) per round]
    chosen = {}
    failures = []
    base = {}
    base_algo = {}
    t_start = time.monotonic()
    for rnd in range(a.rounds):
        # Alternate the order every round: placements, then algorithms rotated, so that a
        # noisy minute does not land on the same cells each time.
        pl = placements if rnd % 2 == 0 else placements[::-1]
        for placement in pl:
            rot = algos[rnd % len(algos):] + algos[:rnd % len(algos)]
            combos = sorted({iters_for(s) for s in sizes})
            for algo in rot:
                for (w, n) in combos:
                    tag = "r%d-%s-%s-base-w%dn%d" % (rnd, placement, algo, w, n)
                    res, log, delta, wall, rcs = run.run(placement, algo, BASE_BYTES, w, n, tag)
                    if res is None:
                        failures.append(tag)
                        print("topo_proof: FAILED %s (exit %s, %s)" % (tag, rcs, log), flush=True)
                        continue
                    base.setdefault((placement, algo, w, n), []).append(delta)
                    # auto may choose another algorithm at 32 bytes than at S: the
                    # expected bytes subtract coll-sim's 32 bytes of this one.
                    base_algo[(placement, algo)] = chosen_algo(log, BASE_BYTES) or algo
            for size in sizes:
                for algo in rot:
                    w, n = iters_for(size)
                    tag = "r%d-%s-%s-%s" % (rnd, placement, algo, fmt_size(size))
                    res, log, delta, wall, rcs = run.run(placement, algo, size, w, n, tag)
                    if res is None:
                        failures.append(tag)
                        print("topo_proof: FAILED %s (exit %s, %s)" % (tag, rcs, log), flush=True)
                        continue
                    r0 = res["results"][0]
                    t_oop = r0["out_of_place"]["time_us"] * 1e-6
                    t_ip = r0["in_place"]["time_us"] * 1e-6
                    ch = chosen_algo(log, size) or "?"
                    samples.setdefault((placement, algo, size), []).extend([t_oop, t_ip])
                    chosen.setdefault((placement, algo, size), []).append(ch)
                    raw.write("%d,%s,%s,%d,%d,%d,%.1f,%.1f,%s,%.2f,%s\n" % (
                        rnd, placement, algo, size, w, n, t_oop * 1e6, t_ip * 1e6, ch, wall,
                        ",".join(str(x) for d in delta for x in d)))
                    raw.flush()
                    bl = base.get((placement, algo, w, n))
                    if bl:
                        b = bl[-1]
                        calls = 2 * w + 2 * n
                        eg = [((d[0] - hdr * d[1]) - (bb[0] - hdr * bb[1])) / calls
                              for d, bb in zip(delta, b)]
                        ig = [((d[2] - hdr * d[3]) - (bb[2] - hdr * bb[3])) / calls
                              for d, bb in zip(delta, b)]
                        rtx = sum(d[4] for d in delta)
                        payload.setdefault((placement, algo, size), []).append((eg, ig, rtx))
                    print("topo_proof: round %d %-4s %-10s %5s  %.4f s %.4f s%s  (%.1f s, %.0f s in)"
                          % (rnd, placement, algo, fmt_size(size), t_oop, t_ip,
                             "  chose " + ch if algo == "auto" else "", wall,
                             time.monotonic() - t_start), flush=True)
    raw.close()
    report(a, run, sim, algos, sizes, placements, samples, payload, chosen, failures, cal,
           base_algo)
    return 1 if failures else 0


def report(a, run, sim, algos, sizes, placements, samples, payload, chosen, failures, cal,
           base_algo):
    rows = []
    for placement in placements:
        hosts = run.hosts(placement)
        for algo in algos:
            for size in sizes:
                key = (placement, algo, size)
                ts = samples.get(key)
                if not ts:
                    continue
                ch = chosen.get(key, ["?"])
                sim_algo = algo if algo != "auto" else statistics.mode(ch)
                if sim_algo == "?":
                    continue
                pred = sim.timing(sim_algo, placement, size)
                b_algo = base_algo.get((placement, algo), sim_algo)
                if b_algo == "auto":
                    b_algo = sim_algo
                pbase = sim.timing(b_algo, placement, BASE_BYTES)
                of, inf, link = sim.frames(sim_algo, hosts, size)
                ofb, infb, _ = sim.frames(b_algo, hosts, BASE_BYTES)
                exp_eg = [pred["uplink_egress"][i] - pbase["uplink_egress"][i]
                          + FRAME * (of[i] - ofb[i]) for i in range(run.nnodes)]
                exp_ig = [pred["uplink_ingress"][i] - pbase["uplink_ingress"][i]
                          + FRAME * (inf[i] - infb[i]) for i in range(run.nnodes)]
                pl = payload.get(key, [])
                # Measured per call, median over rounds, per node.
                if pl:
                    meas_eg = [med([r[0][i] for r in pl]) for i in range(run.nnodes)]
                    meas_ig = [med([r[1][i] for r in pl]) for i in range(run.nnodes)]
                    spread_eg = max(max(r[0][i] for r in pl) - min(r[0][i] for r in pl)
                                    for i in range(run.nnodes))
                else:
                    meas_eg = meas_ig = [float("nan")] * run.nnodes
                    spread_eg = float("nan")
                rtx = max((r[2] for r in pl), default=0)
                diff = max(abs(m - e) for m, e in zip(meas_eg + meas_ig, exp_eg + exp_ig))
                t = med(ts)
                rows.append(dict(
                    placement=placement, algo=algo, sim_algo=sim_algo, size=size,
                    time_s=t, time_min=min(ts), time_max=max(ts), nsamples=len(ts),
                    pred_s=pred["predicted_s"], ratio=t / pred["predicted_s"],
                    sim_uplink_bytes=pred["uplink_egress"], sim_link_check=link,
                    exp_egress=exp_eg, exp_ingress=exp_ig, meas_egress=meas_eg,
                    meas_ingress=meas_ig, max_abs_diff=diff, retrans_max=rtx, round_spread=spread_eg,
                    chosen=ch))
    # The fastest measured per (placement, size), auto against it.
    for placement in placements:
        for size in sizes:
            forced = [r for r in rows if r["placement"] == placement and r["size"] == size
                      and r["algo"] != "auto"]
            if not forced:
                continue
            best = min(forced, key=lambda r: r["time_s"])
            for r in rows:
                if r["placement"] == placement and r["size"] == size:
                    r["best_algo"], r["best_s"] = best["algo"], best["time_s"]
    with open(os.path.join(a.out, "topo_proof.json"), "w") as f:
        json.dump(dict(calibration=cal, rate_mbit=a.rate_mbit, nodes=run.nnodes,
                       ranks_per_node=run.k, rounds=a.rounds, failures=failures, cells=rows),
                  f, indent=1)
    csv = os.path.join(a.out, "topo_proof.csv")
    with open(csv, "w") as f:
        f.write("placement,algo,size,time_s,time_min_s,time_max_s,pred_s,ratio,"
                "meas_egress_max,exp_egress_max,max_abs_diff_bytes,chosen,best_algo,best_s\n")
        for r in rows:
            f.write("%s,%s,%d,%.6f,%.6f,%.6f,%.6f,%.4f,%.0f,%.0f,%.0f,%s,%s,%.6f\n" % (
                r["placement"], r["algo"], r["size"], r["time_s"], r["time_min"], r["time_max"],
                r["pred_s"], r["ratio"], max(r["meas_egress"]), max(r["exp_egress"]),
                r["max_abs_diff"], r["sim_algo"], r.get("best_algo", ""), r.get("best_s", 0)))
    print_table(a, run, rows, placements, sizes, failures)


def print_table(a, run, rows, placements, sizes, failures):
    out = []
    w = out.append
    w("topo_proof: %d nodes x %d ranks, uplinks %g Mbit/s each way (tbf), %d rounds"
      % (run.nnodes, run.k, a.rate_mbit, a.rounds))
    w("time: median of oop+ip samples over rounds [min-max]; pred: coll-sim timing mode;"
      " bytes: payload per call on the busiest uplink (egress), measured vs coll-sim"
      " (+16 B tcp frames); diff: largest |measured - expected| over every node's"
      " egress and ingress, bytes per call; rtx: TCP segments resent in the cell (max over rounds)")
    w("%-5s %-10s %5s %11s %19s %10s %6s %12s %12s %8s %4s %s" % (
        "place", "algo", "size", "time s", "[min-max]", "pred s", "ratio", "meas B/call",
        "sim B/call", "diff B", "rtx", "note"))
    for r in rows:
        note = ""
        if r["algo"] == "auto":
            within = r["time_s"] <= 1.10 * r["best_s"]
            note = "chose %s; best %s %.4f s: %s" % (
                r["sim_algo"], r["best_algo"], r["best_s"],
                "ok (within 10%)" if within else "MISS (+%.0f%%)" % (100 * (r["time_s"] / r["best_s"] - 1)))
        elif r["algo"] in ("ring", "tree", "two_level"):
            note = "ok" if abs(r["ratio"] - 1) <= 0.15 else "MISS (>15%)"
        w("%-5s %-10s %5s %11.4f [%8.4f-%8.4f] %10.4f %6.3f %12.0f %12.0f %8.0f %4d %s" % (
            r["placement"], r["algo"], fmt_size(r["size"]), r["time_s"], r["time_min"],
            r["time_max"], r["pred_s"], r["ratio"], max(r["meas_egress"]),
            max(r["exp_egress"]), r["max_abs_diff"], r["retrans_max"], note))
    # k times fewer bytes and faster: round-robin, node-aware against ring.
    w("")
    w("round-robin placement: ring's busiest uplink bytes and time over the node-aware ones'")
    for size in sizes:
        ring = [r for r in rows if r["placement"] == "rr" and r["algo"] == "ring" and r["size"] == size]
        if not ring:
            continue
        for other in ("ring_nodes", "two_level"):
            o = [r for r in rows if r["placement"] == "rr" and r["algo"] == other and r["size"] == size]
            if o:
                w("  %5s %-10s bytes x%.2f (sim x%.2f)  time x%.2f (sim x%.2f)" % (
                    fmt_size(size), other, max(ring[0]["meas_egress"]) / max(o[0]["meas_egress"]),
                    max(ring[0]["exp_egress"]) / max(o[0]["exp_egress"]),
                    ring[0]["time_s"] / o[0]["time_s"], ring[0]["pred_s"] / o[0]["pred_s"]))
    if failures:
        w("failed cells: " + " ".join(failures))
    text = "\n".join(out)
    print(text)
    with open(os.path.join(a.out, "topo_proof.txt"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
