package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/topo"
)

// The fleet's commands talk to etcd, not to a proxy: -etcd (or
// SHARDGATE_ETCD) and -cluster (SHARDGATE_CLUSTER) say where.

type fleetFlags struct{ etcd, cluster *string }

func (f fleetFlags) open(ctx context.Context) (*topo.Store, error) {
	if *f.etcd == "" {
		return nil, errors.New("-etcd ENDPOINTS (or SHARDGATE_ETCD) is needed: the fleet's topology is in etcd")
	}
	s, err := topo.Open(ctx, topo.Options{Endpoints: strings.Split(*f.etcd, ","), Prefix: *f.cluster})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w (topology changes need etcd)", *f.etcd, err)
	}
	return s, nil
}

// topoCmd: topo load FILE stores a ks.yaml as the fleet's next topology
// version (checked first: a file that does not validate changes nothing);
// topo get prints the version in force.
func topoCmd(f fleetFlags, args []string, w io.Writer) error {
	if len(args) == 0 {
		return usagef("topo", "needs load FILE or get")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	switch args[0] {
	case "load":
		if len(args) != 2 {
			return usagef("topo", "load needs the FILE: shardgate topo load FILE")
		}
		text, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		cfg, err := config.Parse(text)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			return fmt.Errorf("%s: %w (nothing stored)", args[1], err)
		}
		rev, err := s.Put(ctx, text, -1)
		if err != nil {
			return fmt.Errorf("topology change refused: %w", err)
		}
		fmt.Fprintf(w, "topology version %d stored under %s; every proxy applies it (shardgate fleet shows which did)\n", rev, *f.cluster)
		return nil
	case "get":
		v, err := s.Get(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# topology version %d\n%s", v.Rev, v.YAML)
		return nil
	}
	return usagef("topo", "unknown topo command %q: topo load FILE | topo get", args[0])
}

// fleetCmd lists the live proxies of the fleet: name, addresses, the
// topology version each serves, the leader, the drift and the recorded
// masters.
func fleetCmd(f fleetFlags, w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	members, err := s.Members(ctx)
	if err != nil {
		return err
	}
	leader, err := s.Leader(ctx)
	if err != nil {
		return err
	}
	var latest int64
	if v, err := s.Get(ctx); err == nil {
		latest = v.Rev
	} else if !errors.Is(err, topo.ErrNoTopology) {
		return err
	}
	masters, err := s.Masters(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "fleet %s: topology version %d, %d proxies, leader %s\n", *f.cluster, latest, len(members), orNone(leader))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROXY\tADDR\tADMIN\tVERSION\tSTATE")
	drift := 0
	for _, m := range members {
		state := "in sync"
		switch {
		case m.Err != "":
			state, drift = "failed: "+m.Err, drift+1
		case m.Applied != latest:
			state, drift = fmt.Sprintf("drift: serves %d", m.Applied), drift+1
		}
		if m.ID == leader {
			state += " (leader)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.ID, m.Addr, m.AdminAddr, m.Applied, state)
	}
	tw.Flush()
	for node, addr := range masters {
		fmt.Fprintf(w, "recorded master of %s: %s\n", node, addr)
	}
	if drift > 0 {
		return fmt.Errorf("%d of %d proxies do not serve version %d", drift, len(members), latest)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func fleetFlagsOf(fs *flag.FlagSet) fleetFlags {
	return fleetFlags{
		etcd:    fs.String("etcd", "", "the fleet's etcd `ENDPOINTS`, comma-separated (topo, fleet; plan, apply and status of a fleet)"),
		cluster: fs.String("cluster", "/shardgate/default", "the fleet's key `PREFIX` in etcd"),
	}
}
