//go:build !nogrpc

package main

import "github.com/ffpf-go/ffpf/functions/dta/collector/metrics"

// dtaMetrics answers the scrapes of ffpf dta collect --http.
var dtaMetrics = metrics.Handler

// elsewhere is where the lean build runs a command that needs what it
// leaves out again; this is the whole build, so never.
func elsewhere(error) (int, bool) { return 0, false }
