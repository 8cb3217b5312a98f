// BACKWARD of an undilated layer as stride^D forward convolutions, one per output phase, each
// run by the forward algorithm the list chooses for it: no zeros, no scatter.
//
// On an axis with stride s, output Y receives x[i] * w[k] for i * s + k = Y + start. The
// outputs of phase q < s, Y = q + s * j, all have (Y + start) mod s = r = (q + start) mod s, so
// they meet only the taps k = r + s * m (m < M = ceil((K - r) / s)), and with c = (q + start) div s
//   y[q + s * j] = sum over m < M of x[j + c - m] * w[r + s * m]
//                = sum over u < M of x[j + c - (M - 1) + u] * f[u],   f[u] = w[r + s * (M - 1 - u)]:
// a stride-1 forward cross-correlation over x of the M-tap filter f (w's taps with element
// step -s; +s from the mirrored tap in convolution mode), with start padding M - 1 - c (or,
// when that is negative, the input view beginning c - (M - 1) further on), end padding for
// J = ceil((out - q) / s) outputs, written into the view of y that begins at q with steps
// times s. The phases' forward filters {OutC, InC/G, M...} are made from the backward one
// {InC, OutC/G, K...} (axes 0 and 1 swapped, the phase's taps picked) in one pass. Each output
// is then one forward sum (in the forward kernels' fixed order: independent of the thread
// count), with no col2im scatter, no accumulator planes and no multiplication by inserted
// zeros. A phase that no tap reaches (K < s) or whose outputs lie past every input (an output
// larger than nominal) holds the bias and activation of zero.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "common.hpp"
#include "dmlops/core/direct.hpp"
#include "dmlops/core/error.hpp"
#include "rewrites.hpp"

namespace dmlops::conv {
namespace {

// One axis of one phase.
struct PhaseAxis {
  std::int64_t outputs = 0;                        // J
  std::int64_t taps = 0;                           // M; 0 when no input reaches the phase
  std::int64_t in_first = 0, inputs = 0;           // the input view: [in_first, in_first + inputs)
  std::int64_t start = 0, end = 0;                 // the forward paddings
  std::int64_t filter_first = 0, filter_step = 0;  // the backward tap of forward tap 0, then the step

  PhaseAxis(const Geometry& g, int a, std::int64_t q, bool flip) {
    const std::int64_t s = g.strides[a], K = g.kernel[a];
    outputs = q < g.out_spatial[a] ? ceil_div(g.out_spatial[a] - q, s) : 0;
    const std::int64_t r = (q + g.start[a]) % s, c = (q + g.start[a]) / s;
    taps = r < K ? ceil_div(K - r, s) : 0;
    const std::int64_t lo = c - (taps - 1);  // the input output 0's forward tap 0 reads
    in_first = std::max<std::int64_t>(lo, 0);
    start = in_first - lo;
    inputs = std::min(g.in_spatial[a], c + outputs) - in_first;  // up to output J - 1's last tap, c + J - 1
    if (outputs == 0 || taps == 0 || inputs <= 0) {
      taps = 0;
      return;
    }
    end = outputs - 1 + taps - start - inputs;
    const std::int64_t last = r + s * (taps - 1);  // the backward tap forward tap 0 multiplies
    filter_first = flip ? K - 1 - last : last;
    filter_step = flip ? s : -s;
  }
};

// The forward layer of a phase that some input reaches (axes: its PhaseAxis per axis): stride 1,
// undilated, over the phase's input view, into the phase's outputs.
Geometry phase_geometry(const Geometry& g, const std::vector<PhaseAxis>& axes) {
  Geometry f = g;
  f.direction = ConvolutionDirection::Forward;
  f.strides = f.dilations = Dims::filled(g.D, 1);
  f.output_padding = Dims::filled(g.D, 0);
  for (int a = 0; a < g.D; ++a) {
    f.in_spatial[a] = axes[a].inputs;
    f.out_spatial[a] = axes[a].outputs;
    f.kernel[a] = axes[a].taps;
    f.start[a] = axes[a].start, f.end[a] = axes[a].end;
  }
  f.output = TensorDesc{g.dtype, {g.batch, g.out_channels}, std::nullopt};
  for (std::int64_t s : f.out_spatial) f.output.sizes.push_back(s);
  return f;
}

constexpr std::int64_t kMaxPhases = 64;       // more phases (strides) than this stay with the scatter
constexpr std::int64_t kMinPhaseOutputs = 512;  // batch x output positions per phase, at least

// Every element of `out` ({N, OutC, ...}) set to its channel's bias, then the activation.
template <class T>
void fill_bias(const ConvolutionDesc& desc, const TensorView* bias, const TensorView& out) {
  using Acc = typename AccumulatorOf<T>::type;
  const Dims sizes = spatial(out.sizes), strides = spatial(out.byte_strides);
  const std::int64_t positions = sizes.product(), channels = out.sizes[1];
  parallel_for(0, out.sizes[0] * channels, std::max<std::int64_t>(1, (1 << 14) / positions),
               [&](std::int64_t begin, std::int64_t end) {
                 std::vector<Acc> row(static_cast<std::size_t>(positions));
                 for (std::int64_t i = begin; i < end; ++i) {
                   const std::int64_t n = i / channels, oc = i % channels;
                   std::fill(row.begin(), row.end(), Acc(0));
                   finish_row<T, Acc>(row.data(), positions, bias_of<T, Acc>(bias, oc), desc.fused_activation,
                                      static_cast<std::byte*>(out.data) + n * out.byte_strides[0] + oc * out.byte_strides[1],
                                      sizes, strides, 0);
                 }
               });
}

template <class T>
void run_typed(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  const int D = g.D;
  const bool flip = desc.mode == ConvolutionMode::Convolution;
  const std::int64_t kernel_taps = g.kernel.product();
  const Dims kernel_strides = packed_strides(g.kernel);  // W's taps, row-major
  struct Phase {
    Dims q;                             // its first output, per axis
    std::vector<PhaseAxis> axes;
    bool reached = true;                // by some input through some tap (else: the bias only)
    std::int64_t taps = 1, filter = 0;  // its forward filter: taps per channel pair, where it starts
  };
  std::vector<Phase> phases;
  std::int64_t filter_size = 0;
  // Per tap of W (row-major), where its row of output channels goes in the phases' filters, and
  // the step per input channel; -1: a tap no phase uses (in a phase no input reaches).
  std::vector<std::int64_t> destination(static_cast<std::size_t>(kernel_taps), -1), channel_step(destination);
  for (Dims q = Dims::filled(D, 0);;) {
    Phase& p = phases.emplace_back(Phase{.q = q, .axes = {}, .filter = filter_size});
    std::vector<std::int64_t> source{0};  // per forward tap u (row-major), W's tap
    for (int a = 0; a < D; ++a) {
      const PhaseAxis& axis = p.axes.emplace_back(g, a, q[a], flip);
      p.reached = p.reached && axis.taps > 0;
      p.taps *= axis.taps;
      std::vector<std::int64_t> longer;  // the taps so far, then axis a's
      for (std::int64_t tap : source) {
        for (std::int64_t u = 0; u < axis.taps; ++u)
          longer.push_back(tap + (axis.filter_first + u * axis.filter_step) * kernel_strides[a]);
      }
      source = std::move(longer);
    }
    if (p.reached) {
      for (std::int64_t u = 0; u < p.taps; ++u) {
        destination[source[u]] = p.filter + u * g.out_channels;
        channel_step[source[u]] = p.taps * g.out_channels;
      }
      filter_size += g.out_channels * g.in_per_group * p.taps;
    }
    int a = D - 1;
    for (; a >= 0 && ++q[a] == std::min(g.strides[a], g.out_spatial[a]); --a) q[a] = 0;
    if (a < 0) break;
  }

  // Every phase's forward filter {OutC, InC/G, M...} laid out as [ic'][u][oc]: F[g * OCg + oc',
  // ic', u] = W[g * ICg + ic', oc', the tap forward tap u multiplies] at (ic' * M + u) * OutC + g
  // * OCg + oc'. Each output channel's weights are then strided, but the direct kernels' packing
  // reads a tap's output channels as one contiguous run (FilterMatrix::gather_columns), and the
  // phases' filters are made in one pass over W: per input channel, its {OCg, taps} block of W
  // transposed (pack_direct_filter's 8 x 8 transposes when it is dense float; else value by
  // value), then each tap's row of output channels copied where it goes. (Each phase picking its
  // own taps out of W would bring all of W's cache lines in once per phase, and a layout with
  // each output channel's weights together would have to be gathered value by value.)
  const Scratch<T> filters(filter_size);
  const std::int64_t w0 = v.filter.byte_strides[0], w1 = v.filter.byte_strides[1];
  std::vector<std::int64_t> tap_offset(static_cast<std::size_t>(kernel_taps));  // bytes, within W[ic, oc']
  for (std::int64_t t = 0; t < kernel_taps; ++t) {
    for (int a = 0; a < D; ++a) tap_offset[t] += t / kernel_strides[a] % g.kernel[a] * v.filter.byte_strides[2 + a];
  }
  bool dense_taps = std::is_same_v<T, float> && aligned(v.filter.data, alignof(float)) && w0 % 4 == 0 && w1 % 4 == 0;
  for (std::int64_t t = 0; t < kernel_taps; ++t) dense_taps = dense_taps && tap_offset[t] == t * 4;
  const std::int64_t OCg = g.out_per_group;
  parallel_for(0, g.in_channels, std::max<std::int64_t>(1, (1 << 14) / (OCg * kernel_taps)), [&](std::int64_t begin, std::int64_t end) {
    std::vector<T> block(static_cast<std::size_t>(kernel_taps * OCg));  // [tap][oc']
    for (std::int64_t ic = begin; ic < end; ++ic) {
      const std::byte* src = static_cast<const std::byte*>(v.filter.data) + ic * w0;
      if constexpr (std::is_same_v<T, float>) {
        if (dense_taps) {
          pack_direct_filter(reinterpret_cast<const float*>(src), w1 / 4, OCg, kernel_taps, OCg, block.data());
        }
      }
      if (!dense_taps) {
        for (std::int64_t t = 0; t < kernel_taps; ++t) {
          for (std::int64_t o = 0; o < OCg; ++o) block[t * OCg + o] = load<T>(src + o * w1 + tap_offset[t]);
        }
      }
      const std::int64_t grp = ic / g.in_per_group, ic_in_group = ic % g.in_per_group;
      for (std::int64_t t = 0; t < kernel_taps; ++t) {
        if (destination[t] < 0) continue;
        std::memcpy(filters.get() + destination[t] + ic_in_group * channel_step[t] + grp * OCg, block.data() + t * OCg,
                    static_cast<std::size_t>(OCg) * sizeof(T));
      }
    }
  });

  ConvolutionDesc forward_desc = desc;
  forward_desc.mode = ConvolutionMode::CrossCorrelation;  // the filters carry the flip
  forward_desc.direction = ConvolutionDirection::Forward;
  // One phase after the other, each with every thread. (Equal phases side by side, one per
  // thread, measured no faster.)
  for (const Phase& p : phases) {
    // The phase's outputs: a view of y beginning at q, steps times the strides.
    TensorView out = v.out;
    for (int a = 0; a < D; ++a) {
      out.sizes[2 + a] = p.axes[a].outputs;
      out.data = static_cast<std::byte*>(out.data) + p.q[a] * v.out.byte_strides[2 + a];
      out.byte_strides[2 + a] *= g.strides[a];
    }
    if (!p.reached) {
      fill_bias<T>(desc, v.bias, out);
      continue;
    }
    const Geometry f = phase_geometry(g, p.axes);
    TensorView in = v.in, filter = v.filter;
    filter.sizes[0] = g.out_channels, filter.sizes[1] = g.in_per_group;
    filter.data = filters.get() + p.filter;
    std::int64_t tap_step = g.out_channels;  // entries between consecutive taps on axis a
    for (int a = D - 1; a >= 0; --a) {
      const PhaseAxis& axis = p.axes[a];
      in.sizes[2 + a] = axis.inputs;
      filter.sizes[2 + a] = axis.taps;
      in.data = static_cast<std::byte*>(in.data) + axis.in_first * v.in.byte_strides[2 + a];
      filter.byte_strides[2 + a] = tap_step * std::int64_t{sizeof(T)};
      tap_step *= axis.taps;
    }
    filter.byte_strides[0] = sizeof(T);
    filter.byte_strides[1] = tap_step * std::int64_t{sizeof(T)};
    run_forward(forward_desc, f, Views{in, filter, v.bias, out});
  }
}

// Layers the phases compute faster than the scatter (measured, float32): undilated and strided,
// with few phases, a window wider than the stride on some axis and a vector of output channels
// per group (so that the phases' forward layers run direct), and at least kMinPhaseOutputs
// outputs per phase and channel: below that (e.g. a 4x4 stride-2 layer onto 32 x 32, 256 per
// phase), the phases' per-call costs (filter passes, padded planes, one product per phase)
// cost as much as the scatter and its GEMM's larger panels save.
Verdict applies(const Geometry& g, const Cpu& cpu) {
  if (g.direction != ConvolutionDirection::Backward) return {false, "a backward algorithm"};
  if (g.dtype != DataType::Float32) return {false, "float32 only"};
  std::int64_t phases = 1;
  bool window = false;
  for (int a = 0; a < g.D; ++a) {
    if (g.dilations[a] != 1) return {false, "dilated"};
    if (g.strides[a] > kMaxPhases) return {false, "a stride above " + std::to_string(kMaxPhases)};
    phases *= std::min(g.strides[a], g.out_spatial[a]);
    window = window || g.kernel[a] > g.strides[a];
  }
  if (phases <= 1) return {false, "one phase (unit strides)"};
  if (phases > kMaxPhases) return {false, std::to_string(phases) + " phases, above " + std::to_string(kMaxPhases)};
  if (!window) return {false, "no window wider than its stride (every output one tap: the scatter adds no sums)"};
  const std::int64_t lanes = cpu.lanes(DataType::Float32);
  if (g.out_per_group < lanes)
    return {false, "fewer output channels per group (" + std::to_string(g.out_per_group) + ") than a vector holds (" +
                       std::to_string(lanes) + ")"};
  if (g.batch * g.out_spatial.product() < kMinPhaseOutputs * phases)
    return {false, "fewer than " + std::to_string(kMinPhaseOutputs) + " outputs per phase"};
  return {true, std::to_string(phases) + " phases, each a forward layer"};
}

void describe(const Geometry& g, ConvolutionPlan& plan) {
  std::int64_t phases = 1;
  for (int a = 0; a < g.D; ++a) phases *= std::min(g.strides[a], g.out_spatial[a]);
  plan.tiles = {{"phases", phases}};
  plan.tasks = phases;  // one after the other, each with every thread
  // The forward algorithm of the first phase an input reaches, as run_forward chooses it.
  for (Dims q = Dims::filled(g.D, 0);;) {
    std::vector<PhaseAxis> axes;
    for (int a = 0; a < g.D; ++a) axes.emplace_back(g, a, q[a], false);
    if (std::all_of(axes.begin(), axes.end(), [](const PhaseAxis& axis) { return axis.taps > 0; })) {
      std::string reason;
      const Algorithm& first = choose(rewrite(phase_geometry(g, axes)).geometry, Cpu::detect(), {}, reason);
      plan.reason += "; the first phase runs " + std::string(first.name);
      return;
    }
    int a = g.D - 1;
    for (; a >= 0 && ++q[a] == std::min(g.strides[a], g.out_spatial[a]); --a) q[a] = 0;
    if (a < 0) return;
  }
}

void run(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  visit_float(g.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      run_typed<T>(desc, g, v);
    } else {
      fail(kOp, ": the backward_phases algorithm computes float32 only");  // applies() says so first
    }
  });
}

}  // namespace

const Algorithm kBackwardPhases{"backward_phases", applies, describe, run, nullptr};

}  // namespace dmlops::conv
