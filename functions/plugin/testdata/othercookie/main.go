// Command othercookie is a go-plugin plugin that is not ffpf's: by
// default one of another program (its handshake cookie is not ffpf's);
// with FFPF_TEST_OTHER=version one with ffpf's cookie that speaks another
// version of ffpf's protocol, with FFPF_TEST_OTHER=netrpc one that serves
// go-plugin's net/rpc instead of gRPC.
package main

import (
	"os"

	goplugin "github.com/hashicorp/go-plugin"
)

func main() {
	hs := goplugin.HandshakeConfig{ProtocolVersion: 1, MagicCookieKey: "OTHER_PROGRAM", MagicCookieValue: "x"}
	switch os.Getenv("FFPF_TEST_OTHER") {
	case "version":
		hs = goplugin.HandshakeConfig{ProtocolVersion: 2, MagicCookieKey: "FFPF_PLUGIN", MagicCookieValue: "function-class"}
	case "netrpc":
		hs = goplugin.HandshakeConfig{ProtocolVersion: 1, MagicCookieKey: "FFPF_PLUGIN", MagicCookieValue: "function-class"}
	}
	goplugin.Serve(&goplugin.ServeConfig{HandshakeConfig: hs, Plugins: goplugin.PluginSet{}})
}
