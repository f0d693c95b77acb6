package metrics

import "time"

// FleetStats is the fleet as this proxy last saw it (package fleet, with
// etcd): absent when the proxy runs from one file.
type FleetStats struct {
	ID            string `json:"id"` // this proxy's name in the fleet
	EtcdReachable bool   `json:"etcd_reachable"`
	EtcdError     string `json:"etcd_error,omitempty"`
	Leader        string `json:"leader"`
	// Applied is the topology version this proxy serves; Latest the
	// newest any live proxy applied; ApplyError why this one did not
	// apply the newest it saw.
	Applied    int64         `json:"applied_version"`
	Latest     int64         `json:"latest_version"`
	ApplyError string        `json:"apply_error,omitempty"`
	Members    []FleetMember `json:"members"`
	// Drift names the live proxies that do not serve Latest.
	Drift   []string  `json:"drift,omitempty"`
	Checked time.Time `json:"checked"`
}

// FleetMember is one live proxy of the fleet.
type FleetMember struct {
	ID        string    `json:"id"`
	Addr      string    `json:"addr"`
	AdminAddr string    `json:"admin_addr,omitempty"`
	Applied   int64     `json:"applied_version"`
	Started   time.Time `json:"started"`
	Error     string    `json:"error,omitempty"`
}

// fleet sends the fleet's series; st carries the publishing of swapped rules.
func (e emitter) fleet(f *FleetStats, st Stats) {
	g := gauge
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	e.one("shardgate_fleet_etcd_up", "1 when etcd answered this proxy's last check.", g, b(f.EtcdReachable))
	e.one("shardgate_fleet_leader", "1 when this proxy leads the fleet (decides master switches).", g, b(f.Leader == f.ID))
	e.one("shardgate_fleet_applied_version", "The topology version (etcd revision) this proxy serves.", g, float64(f.Applied))
	e.one("shardgate_fleet_latest_version", "The newest topology version a live proxy of the fleet serves.", g, float64(f.Latest))
	e.one("shardgate_fleet_members", "Live proxies of the fleet.", g, float64(len(f.Members)))
	e.one("shardgate_fleet_drift_members", "Live proxies that do not serve the latest topology version.", g, float64(len(f.Drift)))
	e.one("shardgate_fleet_topology_publish_failures_total", "Attempts to write a rule a cutover swapped into the fleet's topology that etcd did not take.", counter, float64(st.TopologyPublishFailures))
	e.one("shardgate_fleet_topology_publish_pending", "Rules a cutover swapped that are not written into the fleet's topology yet.", g, float64(st.TopologyPublishPending))
}
