package httpapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// datasetListings read each record's dataset: in JSON from a nested member,
// in XML from an attribute of a child element.
var datasetListings = []struct{ name, options string }{
	{"json", strings.Replace(jsonOptions, "fields: {key: id,", "fields: {key: id, dataset: parent.dataset,", 1) +
		`list: {url: "/api/records?page={page}&per_page={pageSize}", paging: page, pageSize: 100, items: records}`},
	{"xml", strings.Replace(xmlOptions, `fields: {key: "@id",`, `fields: {key: "@id", dataset: collection.@id,`, 1) +
		`list: {url: "/xml/records?limit=70&token={cursor}", paging: cursor, items: records.record, next: resumptionToken}`},
	{"list fields", jsonOptions + `list: {url: "/api/records?page={page}&per_page={pageSize}", paging: page, pageSize: 100, items: records,
  fields: {key: id, dataset: parent.dataset, fileName: file_name, modified: updated}}`},
}

// TestListDatasets: the dataset field is read from JSON and XML answers
// (absent for a record without one), the options say the store groups
// datasets, and GroupRecords over the store gives each dataset whole.
func TestListDatasets(t *testing.T) {
	t.Parallel()
	const n = 250
	l := newLegacy(t, n)
	for _, tc := range datasetListings {
		t.Run(tc.name, func(t *testing.T) {
			u := upstreamConfig(t, l.URL, tc.options)
			if !GroupsDatasets(u) {
				t.Fatal("GroupsDatasets: false")
			}
			s := open(t, u, nil)
			all, _ := harvest(t, s, time.Time{})
			if len(all) != n {
				t.Fatalf("%d records, want %d", len(all), n)
			}
			want := map[string][]string{}
			for i, f := range all {
				if f.Problem != nil || f.Dataset != datasetOf(i) {
					t.Fatalf("record %d: dataset %q (problem %v), want %q", i, f.Dataset, f.Problem, datasetOf(i))
				}
				if d := datasetOf(i); d != "" {
					want[d] = append(want[d], f.Key)
				}
			}
			var got []string
			err := node.GroupRecords(s).Walk(t.Context(), time.Time{}, func(d *node.Dataset) error {
				got = append(got, d.ID)
				var keys []string
				for _, f := range d.Files {
					keys = append(keys, f.Key)
				}
				slices.Sort(keys)
				if d.Problem != nil || !slices.Equal(keys, want[d.ID]) {
					t.Errorf("dataset %s: %d files %v (problem %v), want %d", d.ID, len(keys), keys, d.Problem, len(want[d.ID]))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []string{"set-0", "set-1", "set-2"}) {
				t.Errorf("datasets %v", got)
			}
		})
	}
}

// TestListDatasetProblem: an item whose other fields cannot be read still
// names its dataset, so that GroupRecords fails that dataset, not another.
func TestListDatasetProblem(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 5)
	u := upstreamConfig(t, l.URL, `fields: {key: id, dataset: parent.dataset, modified: title}
get: {url: "/api/records/{key}/content"}
list: {url: "/api/records?per_page=10", items: records}`)
	all, _ := harvest(t, open(t, u, nil), time.Time{})
	for i, f := range all {
		if f.Problem == nil || f.Dataset != datasetOf(i) || f.Key != fmt.Sprintf("r%05d", i) {
			t.Errorf("record %d: %+v, want a problem with dataset %q", i, f, datasetOf(i))
		}
	}
}

// TestDatasetOptions: only the list's fields group objects; a dataset field
// the list does not read is refused.
func TestDatasetOptions(t *testing.T) {
	t.Parallel()
	list := `list: {url: "/api/records", items: records}`
	for _, tc := range []struct {
		name, options string
		groups        bool
		problem       string
	}{
		{"no dataset", jsonOptions + list, false, ""},
		{"shared fields", strings.Replace(jsonOptions, "fields: {key: id,", "fields: {key: id, dataset: set,", 1) + list, true, ""},
		{"list fields", jsonOptions + `list: {url: "/api/records", items: records, fields: {key: id, dataset: set}}`, true, ""},
		{"list fields without it", strings.Replace(jsonOptions, "fields: {key: id,", "fields: {key: id, dataset: set,", 1) +
			`list: {url: "/api/records", items: records, fields: {key: id}}`, false, "options.fields.dataset"},
		{"no list", strings.Replace(jsonOptions, "fields: {key: id,", "fields: {key: id, dataset: set,", 1), false, "options.fields.dataset"},
		{"stat fields", `get: {url: "/c/{key}"}
stat: {url: "/s/{key}", fields: {dataset: set}}`, false, "options.fields.dataset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := upstreamConfig(t, "http://127.0.0.1:1", tc.options)
			if got := GroupsDatasets(u); got != tc.groups {
				t.Errorf("GroupsDatasets: %v, want %v", got, tc.groups)
			}
			err := CheckOptions(u)
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("CheckOptions: %v", err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Errorf("CheckOptions: %v, want a problem with %s", err, tc.problem)
			}
		})
	}
	if GroupsDatasets(config.Upstream{Type: config.UpstreamHTTP}) {
		t.Error("GroupsDatasets of no options: true")
	}
}
