package gubernator

import (
	"context"
	"fmt"
	"time"

	"github.com/mailgun/gubernator/v2"
	"github.com/sirupsen/logrus"
)

// ServiceRate and ServiceKeys are bench.ServiceRate and bench.ServiceKeys.
const (
	ServiceRate = 1_000_000_000
	ServiceKeys = 10_000
)

// A ServiceClient is bench.ServiceClient.
type ServiceClient interface {
	Check(ctx context.Context, keys []string) (admitted int, err error)
}

// A ServicePeer is bench.ServicePeer.
type ServicePeer struct {
	Name, Note string
	Start      func() (ServiceClient, func(), error)
}

// ServicePeers is Gubernator: one daemon in this process, its own peer,
// asked through its gRPC client.
var ServicePeers = []ServicePeer{
	{Name: "gubernator", Start: startGubernator,
		Note: "github.com/mailgun/gubernator/v2 v2.4.0: one daemon in process, its gRPC client, token bucket (module bench/gubernator)"},
}

type client struct{ c gubernator.V1Client }

func startGubernator() (ServiceClient, func(), error) {
	logger := logrus.New()
	logger.SetLevel(logrus.ErrorLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := gubernator.SpawnDaemon(ctx, gubernator.DaemonConfig{
		Logger:            logger.WithField("peer", "gubernator"),
		InstanceID:        "bench",
		GRPCListenAddress: "127.0.0.1:0",
		HTTPListenAddress: "127.0.0.1:0",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gubernator: %w", err)
	}
	addr := d.GRPCListeners[0].Addr().String()
	d.SetPeers([]gubernator.PeerInfo{{GRPCAddress: addr, HTTPAddress: d.HTTPListener.Addr().String(), IsOwner: true}})
	c, err := gubernator.DialV1Server(addr, nil)
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("gubernator: dialing %s: %w", addr, err)
	}
	return client{c}, d.Close, nil
}

func (g client) Check(ctx context.Context, keys []string) (int, error) {
	reqs := make([]*gubernator.RateLimitReq, len(keys))
	for i, k := range keys {
		reqs[i] = &gubernator.RateLimitReq{
			Name: "bench", UniqueKey: k, Hits: 1, Limit: ServiceRate, Burst: ServiceRate,
			Duration: 1000, Algorithm: gubernator.Algorithm_TOKEN_BUCKET,
		}
	}
	resp, err := g.c.GetRateLimits(ctx, &gubernator.GetRateLimitsReq{Requests: reqs})
	if err != nil {
		return 0, err
	}
	admitted := 0
	for _, r := range resp.Responses {
		if r.Error != "" {
			return admitted, fmt.Errorf("gubernator: %s", r.Error)
		}
		if r.Status == gubernator.Status_UNDER_LIMIT {
			admitted++
		}
	}
	return admitted, nil
}
