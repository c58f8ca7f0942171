package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDatasetLease: each dataset source's lease has its own series, apart
// from the store harvest's lease; letting one go keeps its last epoch.
func TestDatasetLease(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	m.SetDatasetLease("oai", true, 3)
	m.SetDatasetLease("tree", true, 9)
	m.SetDatasetLease("oai", false, 3)
	want := `
# HELP d1bridge_dataset_lease_epoch The fencing epoch of a dataset source's harvest lease when this instance last took it (it grows with every new holder), by source; absent before.
# TYPE d1bridge_dataset_lease_epoch gauge
d1bridge_dataset_lease_epoch{source="oai"} 3
d1bridge_dataset_lease_epoch{source="tree"} 9
# HELP d1bridge_dataset_lease_held 1 while this instance holds a dataset source's harvest lease (runs its pass for the instances sharing the catalog), else 0, by source.
# TYPE d1bridge_dataset_lease_held gauge
d1bridge_dataset_lease_held{source="oai"} 0
d1bridge_dataset_lease_held{source="tree"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "d1bridge_dataset_lease_epoch", "d1bridge_dataset_lease_held"); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.harvestHeld); v != 0 {
		t.Errorf("the store harvest's lease gauge %v after dataset leases were taken", v)
	}
	var nilM *Metrics
	nilM.SetDatasetLease("oai", true, 1)
}
