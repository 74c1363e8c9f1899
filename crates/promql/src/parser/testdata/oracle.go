package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	// PARSE_OPTIONS=none gives Prometheus' defaults (every experimental feature off).
	all := os.Getenv("PARSE_OPTIONS") != "none"
	p := parser.NewParser(parser.Options{
		EnableExperimentalFunctions:  all,
		ExperimentalDurationExpr:     all,
		EnableExtendedRangeSelectors: all,
		EnableBinopFillModifiers:     all,
	})
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for sc.Scan() {
		var q string
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		res := map[string]any{}
		func() {
			defer func() {
				if r := recover(); r != nil {
					res["panic"] = fmt.Sprint(r)
				}
			}()
			if os.Getenv("PARSE_MODE") == "selector" {
				ms, err := p.ParseMetricSelector(q)
				if err != nil {
					res["err"] = err.Error()
				} else {
					var strs []string
					for _, m := range ms {
						strs = append(strs, m.String())
					}
					res["ok"] = strs
				}
				return
			}
			e, err := p.ParseExpr(q)
			if err != nil {
				res["err"] = err.Error()
			} else {
				res["ok"] = e.String()
				if os.Getenv("PARSE_JSON") != "" {
					res["json"] = translateAST(e)
				}
				res["pretty"] = e.Pretty(0)
			}
		}()
		b, err := json.Marshal(res)
		if err != nil {
			delete(res, "json")
			res["jsonerr"] = err.Error()
			b, _ = json.Marshal(res)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
}
