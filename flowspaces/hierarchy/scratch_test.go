package hierarchy

import (
	"encoding/json"
	"os"
	"testing"

	_ "github.com/ffpf-go/ffpf/functions/builtin"
)

func TestScratch(t *testing.T) {
	for _, f := range []string{"two-nics", "figure4", "figure9"} {
		r, err := Load("../../examples/hierarchy/"+f+".yaml", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		Format(os.Stdout, r)
	}
	r, _ := Load("../../examples/hierarchy/two-nics.yaml", nil, nil)
	b, _ := json.MarshalIndent(Describe(r), "", " ")
	os.Stdout.Write(b)
	d, a := Discover(nil, nil)
	Format(os.Stdout, d)
	t.Log(a)
}
