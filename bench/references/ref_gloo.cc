// ref_gloo: the reference all-reduce of Gloo (ring or halving-doubling over its TCP
// transport), timed like allreduce_bench and printed in the same columns (in-place only:
// Gloo reduces in place). One process per rank, RANK/WORLD_SIZE from collrun or the shell.
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_data.h"
#include "bench_report.h"

namespace {

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

template <typename T>
const gloo::ReductionFunction<T> *reduction(int op) {
  switch (op) {
  case COLL_PROD: return gloo::ReductionFunction<T>::product;
  case COLL_MIN: return gloo::ReductionFunction<T>::min;
  case COLL_MAX: return gloo::ReductionFunction<T>::max;
  default: return gloo::ReductionFunction<T>::sum;
  }
}

template <typename T>
std::unique_ptr<gloo::Algorithm> make_allreduce(const std::shared_ptr<gloo::Context> &ctx,
                                                T *buf, size_t count, int algo, int op) {
  std::vector<T *> ptrs{buf};
  if (algo == COLL_ALGO_HD)
    return std::unique_ptr<gloo::Algorithm>(
      new gloo::AllreduceHalvingDoubling<T>(ctx, ptrs, (int)count, reduction<T>(op)));
  return std::unique_ptr<gloo::Algorithm>(
    new gloo::AllreduceRing<T>(ctx, ptrs, (int)count, reduction<T>(op)));
}

// The max over ranks of one value, through Gloo itself.
double max_over_ranks(const std::shared_ptr<gloo::Context> &ctx, double value) {
  gloo::AllreduceRing<double> ar(ctx, {&value}, 1, gloo::ReductionFunction<double>::max);
  ar.run();
  return value;
}

struct Timing {
  double time_us;
  long long wrong;
};

template <typename T>
Timing run_size(const bench_args_t &a, const std::shared_ptr<gloo::Context> &ctx,
                const std::vector<unsigned char> &input, std::vector<unsigned char> &work,
                size_t count, std::vector<double> &samples) {
  T *buf = reinterpret_cast<T *>(work.data());
  auto algo = make_allreduce<T>(ctx, buf, count, a.algo, a.op);
  gloo::BarrierAllToAll barrier(ctx);
  for (int it = 0; it < a.iters; it++) {
    std::memcpy(buf, input.data(), count * sizeof(T)); // in place: restore the input
    barrier.run();
    double t0 = now_us();
    algo->run();
    samples[it] = now_us() - t0;
  }
  Timing t{max_over_ranks(ctx, bench_median(samples.data(), a.iters)), -1};
  if (a.check) {
    std::memcpy(buf, input.data(), count * sizeof(T));
    algo->run();
    double local = (double)bench_data_check(buf, count, a.dtype, a.op, ctx->size, 1);
    gloo::AllreduceRing<double> sum(ctx, {&local}, 1, gloo::ReductionFunction<double>::sum);
    sum.run();
    t.wrong = (long long)local;
  }
  return t;
}

Timing run_typed(const bench_args_t &a, const std::shared_ptr<gloo::Context> &ctx,
                 const std::vector<unsigned char> &input, std::vector<unsigned char> &work,
                 size_t count, std::vector<double> &samples) {
  switch (a.dtype) {
  case COLL_INT32: return run_size<int32_t>(a, ctx, input, work, count, samples);
  case COLL_INT64: return run_size<int64_t>(a, ctx, input, work, count, samples);
  case COLL_FLOAT64: return run_size<double>(a, ctx, input, work, count, samples);
  default: return run_size<float>(a, ctx, input, work, count, samples);
  }
}

int env_int(const char *name, int fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

} // namespace

int main(int argc, char **argv) {
  bench_args_t a;
  char err[256];
  if (bench_args_parse(argc, argv, &a, err, sizeof err) != 0) {
    std::fprintf(stderr, "ref_gloo: %s\n", err);
    return 2;
  }
  if (a.help) {
    std::printf("ref_gloo: Gloo all-reduce with allreduce_bench's options (-b -e -f -i -n -w -c\n"
                "-d int32|int64|float|double -o sum|prod|min|max -A ring|hd). One process per\n"
                "rank with RANK and WORLD_SIZE set; rendezvous through a file store in\n"
                "REF_GLOO_STORE_DIR (default /tmp) under the prefix REF_GLOO_PREFIX (default\n"
                "COLL_JOB_TOKEN or MASTER_PORT); TCP on MASTER_ADDR's interface.\n");
    return 0;
  }
  bool type_ok = a.dtype == COLL_INT32 || a.dtype == COLL_INT64 || a.dtype == COLL_FLOAT32 ||
                 a.dtype == COLL_FLOAT64;
  bool op_ok = a.op == COLL_SUM || a.op == COLL_PROD || a.op == COLL_MIN || a.op == COLL_MAX;
  bool algo_ok = a.algo == BENCH_ALGO_UNSET || a.algo == COLL_ALGO_RING || a.algo == COLL_ALGO_HD;
  if (!type_ok || !op_ok || !algo_ok) {
    std::fprintf(stderr, "ref_gloo: supported: -d int32|int64|float|double, -o sum|prod|min|max, "
                         "-A ring|hd\n");
    return 2;
  }
  if (a.algo == BENCH_ALGO_UNSET) a.algo = COLL_ALGO_RING;
  int rank = env_int("RANK", -1), size = env_int("WORLD_SIZE", -1);
  if (rank < 0 || size < 1 || rank >= size) {
    std::fprintf(stderr, "ref_gloo: set RANK and WORLD_SIZE (collrun does)\n");
    return 2;
  }
  const char *dir = std::getenv("REF_GLOO_STORE_DIR");
  const char *prefix = std::getenv("REF_GLOO_PREFIX");
  if (!prefix || !*prefix) prefix = std::getenv("COLL_JOB_TOKEN");
  if (!prefix || !*prefix) prefix = std::getenv("MASTER_PORT");
  const char *host = std::getenv("MASTER_ADDR");
  try {
    gloo::transport::tcp::attr attr(host && *host ? host : "127.0.0.1");
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(dir && *dir ? dir : "/tmp");
    gloo::rendezvous::PrefixStore store(std::string("ref_gloo_") + (prefix ? prefix : "0"),
                                        file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::seconds(60));
    ctx->connectFullMesh(store, dev);

    size_t elem = bench_dtype_size(a.dtype);
    std::vector<unsigned char> input(a.max_bytes + 64), work(a.max_bytes + 64);
    std::vector<double> samples((size_t)a.iters);
    bench_data_fill(input.data(), a.max_bytes / elem, a.dtype, a.op, rank, size, 1);
    if (a.warmup > 0) run_typed(a, ctx, input, work, a.max_bytes / elem, samples);
    if (rank == 0) {
      std::printf("# ref_gloo: Gloo %s all-reduce over TCP, nRanks %d, in-place\n",
                  a.algo == COLL_ALGO_HD ? "halving-doubling" : "ring", size);
      std::printf("# time: MEDIAN of %d iterations, each timed alone after a barrier, max "
                  "over ranks; busbw = algbw * 2(n-1)/n\n",
                  a.iters);
      std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s\n", "size", "count", "type",
                  "redop", "root", "time", "algbw", "busbw", "#wrong");
    }
    int status = 0;
    double sum_busbw = 0.0;
    int rows = 0;
    for (size_t bytes = a.min_bytes; bytes <= a.max_bytes;) {
      size_t count = bytes / elem;
      Timing t = run_typed(a, ctx, input, work, count, samples);
      bench_result_t r;
      bench_result_set(&r, count * elem, t.time_us, size);
      if (t.wrong > 0) status = 1;
      if (rank == 0) {
        char ts[32];
        bench_time_str(t.time_us, ts, sizeof ts);
        std::printf("%12zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5lld\n", count * elem,
                    count, bench_dtype_name(a.dtype), bench_op_name(a.op), -1, ts, r.algbw,
                    r.busbw, t.wrong);
      }
      sum_busbw += r.busbw;
      rows++;
      size_t next = a.step_factor > 1 ? (bytes ? bytes * (size_t)a.step_factor : 1)
                                      : bytes + a.step_bytes;
      if (next <= bytes) break;
      bytes = next;
    }
    if (rank == 0) std::printf("# Avg bus bandwidth    : %g \n#\n", rows ? sum_busbw / rows : 0.0);
    std::fflush(stdout);
    return status;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "ref_gloo: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
