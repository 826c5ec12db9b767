package bpf

import (
	"os"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// TestReadmeQuotesTheRealError keeps the error message README.md shows in
// step with libpcap's. (Every README's examples are checked by
// functions/builtin's TestReadmeExamples.)
func TestReadmeQuotesTheRealError(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile("tcp and dest 80", functions.LinkEthernet, 0); err == nil || !strings.Contains(string(md), err.Error()) {
		t.Errorf("README.md does not quote the error %v", err)
	}
}
