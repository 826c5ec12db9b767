// Command badschema is a plugin whose class declares a parameter twice:
// ffpf refuses it and loads the others.
package main

import (
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin/sdk"
)

type pass struct{}

func (pass) Process(*buffers.Batch) {}

func main() {
	sdk.Serve(&functions.Class{
		Name:      "badschema",
		Params:    []functions.Param{{Name: "x", Type: functions.Int}, {Name: "x", Type: functions.String}},
		MinInputs: 1, MaxInputs: -1,
		New: func(*functions.Context) (functions.Function, error) { return pass{}, nil },
	})
}
