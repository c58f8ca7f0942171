package adapter_test

import (
	"encoding/xml"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

func TestParseTime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want time.Time
	}{
		{"2014-09-18T17:18:33", time.Date(2014, 9, 18, 17, 18, 33, 0, time.UTC)}, // no zone means UTC
		{"2006-08-19T11:27:14-06:00", time.Date(2006, 8, 19, 17, 27, 14, 0, time.UTC)},
		{"2020-01-02T03:04:05.123456+00:00", time.Date(2020, 1, 2, 3, 4, 5, 123_000_000, time.UTC)},
		{"2020-01-02T03:04:05.999999999+02:00", time.Date(2020, 1, 2, 1, 4, 5, 999_000_000, time.UTC)}, // truncated, not rounded
		{"2020-01-02T03:04:05Z", time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"2010-08-23T11:11:11.123456", time.Date(2010, 8, 23, 11, 11, 11, 123_000_000, time.UTC)},
		{"2020-01-02", time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"Thu, 02 Jan 2020 03:04:05 GMT", time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"Thu, 02 Jan 2020 03:04:05 -0700", time.Date(2020, 1, 2, 10, 4, 5, 0, time.UTC)},
		{"  2020-01-02T03:04:05Z\n", time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			got, err := adapter.ParseTime(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != adapter.NewTime(c.want) || got.Location() != time.UTC {
				t.Errorf("ParseTime(%q) = %v, want %v", c.in, got.Time, c.want)
			}
		})
	}
	for _, bad := range []string{"", "yesterday", "2020-13-01", "2020-01-02T25:00:00", "2020-01-02 03:04:05", "1577934245", "2020-01-02T03:04:05+25:00"} {
		t.Run("refuses "+bad, func(t *testing.T) {
			t.Parallel()
			if got, err := adapter.ParseTime(bad); err == nil {
				t.Errorf("ParseTime(%q) = %v", bad, got.Time)
			}
		})
	}
}

// TestParseBound: a range's bound finer than a millisecond is rounded up, so
// that a date at millisecond precision compares with it as with the bound
// itself (fromDate .0005 excludes .000; toDate .0005 includes it).
func TestParseBound(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Time{
		"2020-01-02T03:04:05.0005Z":         time.Date(2020, 1, 2, 3, 4, 5, 1_000_000, time.UTC),
		"2020-01-02T03:04:05.999000001Z":    time.Date(2020, 1, 2, 3, 4, 6, 0, time.UTC),
		"2020-01-02T03:04:05.123Z":          time.Date(2020, 1, 2, 3, 4, 5, 123_000_000, time.UTC),
		"2020-01-02T03:04:05.0000001+01:00": time.Date(2020, 1, 2, 2, 4, 5, 1_000_000, time.UTC),
	} {
		if got, err := adapter.ParseBound(in); err != nil || got != adapter.NewTime(want) {
			t.Errorf("ParseBound(%q) = %v, %v; want %v", in, got.Time, err, want)
		}
	}
	if _, err := adapter.ParseBound("yesterday"); err == nil {
		t.Error("ParseBound took a word for a date")
	}
}

func TestTimeMarshal(t *testing.T) {
	t.Parallel()
	type doc struct {
		XMLName xml.Name     `xml:"doc"`
		At      adapter.Time `xml:"at,attr"`
		When    adapter.Time `xml:"when"`
	}
	zone := time.FixedZone("MDT", -6*3600)
	local := time.Date(2020, 1, 2, 3, 4, 5, 123_456_789, zone)
	cases := []struct {
		name string
		t    adapter.Time
		want string
	}{
		{"NewTime", adapter.NewTime(local), `<doc at="2020-01-02T09:04:05.123Z"><when>2020-01-02T09:04:05.123Z</when></doc>`},
		{"not normalised", adapter.Time{Time: local}, `<doc at="2020-01-02T09:04:05.123Z"><when>2020-01-02T09:04:05.123Z</when></doc>`},
		{"whole second", adapter.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)), `<doc at="2020-01-02T03:04:05.000Z"><when>2020-01-02T03:04:05.000Z</when></doc>`},
		{"zero is omitted", adapter.Time{}, `<doc></doc>`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := xml.Marshal(doc{At: c.t, When: c.t})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Errorf("got  %s\nwant %s", out, c.want)
			}
			var back doc
			if err := xml.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			want := adapter.Time{}
			if !c.t.IsZero() {
				want = adapter.NewTime(c.t.Time)
			}
			if back.At != want || back.When != want {
				t.Errorf("read back %v / %v, want %v", back.At.Time, back.When.Time, want.Time)
			}
		})
	}
	if got := adapter.Now(); got.Location() != time.UTC || got.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("Now() = %v is not UTC at millisecond precision", got.Time)
	}
}

func TestPermissionLevel(t *testing.T) {
	t.Parallel()
	for p, want := range map[adapter.Permission]int{
		adapter.PermRead: 1, adapter.PermWrite: 2, adapter.PermChangePermission: 3, "own": 0, "": 0, "Read": 0,
	} {
		if got := p.Level(); got != want {
			t.Errorf("%q.Level() = %d, want %d", p, got, want)
		}
	}
}

func TestSystemMetadataClone(t *testing.T) {
	t.Parallel()
	sm := sampleSystemMetadata()
	sm.ReplicationPolicy.PreferredMemberNode = []string{"urn:node:KNB"}
	sm.ReplicationPolicy.NumberReplicas = ptr(2)
	sm.Replica = []adapter.Replica{{ReplicaMemberNode: "urn:node:KNB", ReplicationStatus: adapter.ReplicaQueued, ReplicaVerified: when}}
	c := sm.Clone()
	assertEqual(t, c, sm)

	c.AccessPolicy.Allow[0].Subject[0] = "changed"
	c.AccessPolicy.Allow[0].Permission[0] = adapter.PermWrite
	*c.ReplicationPolicy.ReplicationAllowed = true
	*c.ReplicationPolicy.NumberReplicas = 5
	c.ReplicationPolicy.PreferredMemberNode[0] = "changed"
	c.Replica[0].ReplicationStatus = adapter.ReplicaFailed
	c.MediaType.Property[0].Value = "changed"
	if sm.AccessPolicy.Allow[0].Subject[0] != adapter.SubjectPublic || sm.AccessPolicy.Allow[0].Permission[0] != adapter.PermRead ||
		sm.ReplicationPolicy.PreferredMemberNode[0] != "urn:node:KNB" || sm.Replica[0].ReplicationStatus != adapter.ReplicaQueued ||
		sm.MediaType.Property[0].Value != "utf-8" {
		t.Errorf("changing the clone changed the original: %+v", sm)
	}
	if *sm.ReplicationPolicy.ReplicationAllowed || *sm.ReplicationPolicy.NumberReplicas != 2 {
		t.Error("changing the clone's replication policy attributes changed the original")
	}
}
