// Package sdk serves a function class from a binary of its own: a plugin,
// which ffpf runs out of process (functions/plugin). A plugin's main is
// one call,
//
//	func main() { sdk.Serve(dns.Class) }
//
// with the same functions.Class an in-process class registers. The
// plugin is a go-plugin plugin (github.com/hashicorp/go-plugin): Serve
// runs go-plugin's server, its handshake (ffpf's cookie and protocol
// version) and its gRPC services, with the class's service on them.
//
// The sharp edge: this package links go-plugin and what it needs (gRPC's
// reflection and health services, net/rpc), which ffpf itself does not:
// ffpf speaks go-plugin's client protocol on its own, so that none of it
// is initialised by every ffpf process.
package sdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// Serve serves the function class c to ffpf, and returns when ffpf is done
// with it. The class is the one an in-process class would register, with
// one rule more: its function allocates its state with ctx.NewMBuf, so
// that the state lives in memory ffpf reads (plugin.NewServer). A class
// a plugin cannot serve ends the process with the reason. Run by hand, the
// binary says that it is a plugin and exits.
func Serve(c *functions.Class, opts ...plugin.Option) {
	s, err := plugin.NewServer(c, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ffpf plugin: %v\n", err)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  plugin.ProtocolVersion,
			MagicCookieKey:   plugin.CookieKey,
			MagicCookieValue: plugin.CookieValue,
		},
		Plugins:    goplugin.PluginSet{"class": &grpcPlugin{srv: s}},
		GRPCServer: goplugin.DefaultGRPCServer,
		Logger:     hclog.New(&hclog.LoggerOptions{Name: c.Name, Level: hclog.Error, Output: os.Stderr}),
	})
}

// Deadline sets how long ffpf waits for the plugin to answer one batch:
// a plugin that takes longer is taken for hung, killed, and its functions
// fail (their packets counted as dropped). The default is
// plugin.DefaultDeadline.
func Deadline(d time.Duration) plugin.Option { return plugin.Deadline(d) }

// grpcPlugin is the go-plugin side of the service: its server in the
// plugin (ffpf, the client, does not use go-plugin).
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *plugin.Server
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	p.srv.Register(s)
	return nil
}

// GRPCClient makes grpcPlugin a go-plugin GRPCPlugin, which go-plugin's
// server takes for a plugin of gRPC, not net/rpc.
func (p *grpcPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("an ffpf plugin's client is ffpf")
}
