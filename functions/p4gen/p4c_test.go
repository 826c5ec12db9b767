package p4gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4info"
)

// TestP4c compiles every printed program and golden file with p4c when it
// is on the PATH (p4c-bm2-ss, else p4test): our checker is not p4c, and
// this is where the two are compared. With p4c-bm2-ss the P4Info that p4c
// writes must give each object the ID p4info.Of gives it.
func TestP4c(t *testing.T) {
	tool := ""
	for _, name := range []string{"p4c-bm2-ss", "p4test"} {
		if p, err := exec.LookPath(name); err == nil {
			tool = p
			break
		}
	}
	if tool == "" {
		t.Skip("neither p4c-bm2-ss nor p4test is on the PATH (p4c is not installed on this machine): the printed programs are checked by lang/p4 only")
	}
	dir := t.TempDir()
	type prog struct {
		text []byte
		info *p4v1.P4Info
	}
	progs := map[string]prog{}
	for name, p := range p4gen.TestPrograms(t) {
		pr, err := p4gen.Print(p)
		if err != nil {
			t.Fatal(err)
		}
		progs[name] = prog{pr.Text, p4info.Of(p, pr)}
	}
	for name, text := range p4gen.Golden(t) {
		progs[filepath.Base(name)] = prog{text: text}
	}
	for name, pg := range progs {
		src := filepath.Join(dir, name+".p4")
		if err := os.WriteFile(src, pg.text, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--std", "p4-16", src}
		info := filepath.Join(dir, name+".p4info.txtpb")
		if filepath.Base(tool) == "p4c-bm2-ss" {
			args = append(args, "-o", filepath.Join(dir, name+".json"), "--p4runtime-files", info)
		}
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s %s: %v\n%s", filepath.Base(tool), name, err, out)
			continue
		}
		if pg.info == nil || filepath.Base(tool) != "p4c-bm2-ss" {
			continue
		}
		text, err := os.ReadFile(info)
		if err != nil {
			t.Fatal(err)
		}
		theirs := &p4v1.P4Info{}
		if err := prototext.Unmarshal(text, theirs); err != nil {
			t.Fatalf("%s: p4c's P4Info: %v", name, err)
		}
		ids := map[string]uint32{}
		for _, x := range theirs.Tables {
			ids[x.Preamble.Name] = x.Preamble.Id
		}
		for _, x := range theirs.Actions {
			ids[x.Preamble.Name] = x.Preamble.Id
		}
		for _, x := range theirs.Counters {
			ids[x.Preamble.Name] = x.Preamble.Id
		}
		for _, x := range theirs.Registers {
			ids[x.Preamble.Name] = x.Preamble.Id
		}
		for _, x := range theirs.Digests {
			ids[x.Preamble.Name] = x.Preamble.Id
		}
		var ours []*p4v1.Preamble
		for _, x := range pg.info.Tables {
			ours = append(ours, x.Preamble)
		}
		for _, x := range pg.info.Actions {
			ours = append(ours, x.Preamble)
		}
		for _, x := range pg.info.Counters {
			ours = append(ours, x.Preamble)
		}
		for _, x := range pg.info.Registers {
			ours = append(ours, x.Preamble)
		}
		for _, x := range pg.info.Digests {
			ours = append(ours, x.Preamble)
		}
		for _, p := range ours {
			if id, ok := ids[p.Name]; !ok || id != p.Id {
				t.Errorf("%s: %s has id %d in our P4Info, %d in p4c's (present: %v)", name, p.Name, p.Id, id, ok)
			}
		}
	}
}
