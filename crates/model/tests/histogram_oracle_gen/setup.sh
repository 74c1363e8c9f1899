#!/bin/sh
# Builds the Go program that writes the case file of tests/histogram_oracle.rs, from a checkout
# of Prometheus 3.14, in a scratch directory, and runs it.
#
#   sh setup.sh /path/to/prometheus /tmp/hist-oracle [seed cases-per-section] > cases.txt
#   TESSERA_HIST_ORACLE=cases.txt cargo test -p tessera-model --test histogram_oracle -- --ignored
#
# Nothing of Prometheus is copied into this repository: the script takes upstream's histogram
# package and kahansum as they are, and lifts HistogramQuantile/HistogramFraction and the
# per-histogram closure of histogramVariance out of promql/ (whose package needs more dependencies
# than an offline build has), dropping only their annotation arguments. Needs go and python3.
set -eu
PROM=$1
DIR=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR/histogram" "$DIR/kahansum" "$DIR/quant" "$DIR/cmd/gen"
cp "$PROM"/model/histogram/float_histogram.go "$PROM"/model/histogram/generic.go "$PROM"/model/histogram/histogram.go "$DIR/histogram/"
cp "$PROM"/util/kahansum/kahansum.go "$DIR/kahansum/"
sed -i 's#github.com/prometheus/prometheus/util/kahansum#gohist/kahansum#' "$DIR"/histogram/*.go
printf 'module gohist\n\ngo 1.24\n' > "$DIR/go.mod"
cp "$HERE/gen.go.txt" "$DIR/cmd/gen/main.go"
python3 - "$PROM" "$DIR" <<'PY'
import sys
prom, out = sys.argv[1], sys.argv[2]
q = open(prom + '/promql/quantile.go').read()
body = q[q.index('func HistogramQuantile('):q.index('// BucketFraction is a version')]
for a, b in [
    ('func HistogramQuantile(q float64, h *histogram.FloatHistogram, metricName string, pos posrange.PositionRange) (float64, annotations.Annotations)',
     'func HistogramQuantile(q float64, h *histogram.FloatHistogram) (float64, string)'),
    ('func HistogramFraction(lower, upper float64, h *histogram.FloatHistogram, metricName string, pos posrange.PositionRange) (float64, annotations.Annotations)',
     'func HistogramFraction(lower, upper float64, h *histogram.FloatHistogram) (float64, string)'),
    ('annos  annotations.Annotations', 'annos  string'),
    ('annos                             annotations.Annotations', 'annos string'),
    ('return math.Inf(-1), nil', 'return math.Inf(-1), ""'),
    ('return math.Inf(+1), nil', 'return math.Inf(+1), ""'),
    ('return math.NaN(), nil', 'return math.NaN(), ""'),
    ('return 0, nil', 'return 0, ""'),
    ('return math.NaN(), annos.Add(annotations.NewNativeHistogramQuantileNaNResultInfo(metricName, pos))', 'return math.NaN(), "QuantileNaNResult"'),
    ('annos.Add(annotations.NewNativeHistogramQuantileNaNSkewInfo(metricName, pos))', 'annos = "QuantileNaNSkew"'),
    ('annos.Add(annotations.NewNativeHistogramFractionNaNsInfo(metricName, pos))', 'annos = "FractionNaNs"'),
]:
    assert a in body, a
    body = body.replace(a, b)
f = open(prom + '/promql/functions.go').read()
v = f[f.index('func histogramVariance('):]
v = v[v.index('func(h *histogram.FloatHistogram) float64 {') + len('func(h *histogram.FloatHistogram) float64 {'):v.index('}), nil')]
variance = ('func HistogramVariance(h *histogram.FloatHistogram) float64 {\n'
            '\tvar varianceToResult func(float64) float64\n' + v + '\n}\n')
open(out + '/quant/quant.go', 'w').write(
    'package quant\n\nimport (\n\t"math"\n\n\t"gohist/histogram"\n\t"gohist/kahansum"\n)\n\n' + body + '\n' + variance)
PY
cd "$DIR" && GOWORK=off GOFLAGS=-mod=mod GOPROXY=off go run ./cmd/gen "$@"
