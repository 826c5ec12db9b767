// Command othercookie is a go-plugin plugin of another program: its
// handshake cookie is not ffpf's.
package main

import goplugin "github.com/hashicorp/go-plugin"

func main() {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{ProtocolVersion: 1, MagicCookieKey: "OTHER_PROGRAM", MagicCookieValue: "x"},
		Plugins:         goplugin.PluginSet{},
	})
}
