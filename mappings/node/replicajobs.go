package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/durable"
)

// jobRecord is a replication job's file, JobsDir/<sha256 of the PID>.json:
// what a restart needs to run the job again.
type jobRecord struct {
	SourceNode string    `json:"sourceNode"`
	Subject    string    `json:"subject"` // the caller of replicate, for the event log
	Address    string    `json:"address,omitempty"`
	UserAgent  string    `json:"userAgent,omitempty"`
	Accepted   time.Time `json:"accepted"`
	// SystemMetadata is the CN's system metadata, as a v2 document.
	SystemMetadata string `json:"systemMetadata"`
}

const (
	jobExt = ".json"
	badExt = ".bad" // a job file that could not be read, set aside
)

// saveJob writes j's file durably; without a JobsDir it does nothing.
func (n *Node) saveJob(j *replicaJob) error {
	dir := j.cfg.JobsDir
	if dir == "" {
		return nil
	}
	if err := mkdirDurable(dir); err != nil {
		return err
	}
	var sm bytes.Buffer
	if err := adapter.Encode(&sm, j.sm, 2); err != nil {
		return err
	}
	data, err := json.Marshal(jobRecord{SourceNode: j.source, Subject: j.s.Subject, Address: j.s.Address,
		UserAgent: j.s.UserAgent, Accepted: time.Now().UTC(), SystemMetadata: sm.String()})
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(j.sm.Identifier))
	file := filepath.Join(dir, hex.EncodeToString(sum[:])+jobExt)
	if err := durable.WriteFile(file, data, 0o600); err != nil {
		os.Remove(file) // written but maybe not durable: the job is refused, so no trace
		return err
	}
	j.file = file
	return nil
}

// mkdirDurable creates dir when missing, and makes its entry durable.
func mkdirDurable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(dir))
}

// removeJob removes the file of a job that has ended.
func (n *Node) removeJob(j *replicaJob) {
	if j.file == "" {
		return
	}
	if err := durable.Remove(j.file); err != nil {
		n.log.Error("removing the file of an ended replication job", "pid", j.sm.Identifier, "file", j.file, "err", err)
	}
}

// ResumeReplication starts again the jobs an earlier run accepted and did not
// end: those cut short by a shutdown or a crash, whose files are in JobsDir.
// Call it once, at start, after SetReplication: the jobs need its registry,
// token and coordinating node (a reload's settings reach only new jobs).
// Later calls do nothing. A job file that cannot be read is logged and renamed
// with the suffix .bad; nothing here stops the start. It returns the number of
// jobs resumed.
func (n *Node) ResumeReplication() int {
	r := n.repl
	r.mu.Lock()
	done := r.resumed
	r.resumed = true
	r.mu.Unlock()
	cfg := r.settings()
	if done || cfg.JobsDir == "" {
		return 0
	}
	entries, err := os.ReadDir(cfg.JobsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		n.log.Error("reading the replication jobs; none resumed", "dir", cfg.JobsDir, "err", err)
		return 0
	}
	resumed := 0
	for _, e := range entries {
		name, file := e.Name(), filepath.Join(cfg.JobsDir, e.Name())
		switch {
		case e.IsDir():
			continue
		case strings.HasPrefix(name, durable.TempPrefix):
			os.Remove(file) // a job file a crash left half written: that job was not acknowledged
			continue
		case !strings.HasSuffix(name, jobExt):
			continue
		}
		j, err := n.loadJob(file, cfg)
		if err != nil {
			n.log.Error("a replication job file cannot be read; set aside", "file", file+badExt, "err", err)
			if err := os.Rename(file, file+badExt); err != nil {
				n.log.Error("setting aside a replication job file", "file", file, "err", err)
			}
			continue
		}
		if err := n.admit(r.ctx, j, false); err != nil {
			n.log.Error("a replication job cannot be resumed", "pid", j.sm.Identifier, "file", file, "err", err)
			continue
		}
		n.log.Info("replication resumed", "pid", j.sm.Identifier, "source", j.source)
		n.launch(j)
		resumed++
	}
	return resumed
}

// loadJob reads a job file back into a job with the current settings.
func (n *Node) loadJob(file string, cfg Replication) (*replicaJob, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rec jobRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, err
	}
	sm := &adapter.SystemMetadata{}
	if err := adapter.Decode(strings.NewReader(rec.SystemMetadata), sm); err != nil {
		return nil, fmt.Errorf("systemMetadata: %w", err)
	}
	switch {
	case adapter.CheckIdentifier(sm.Identifier) != nil:
		return nil, fmt.Errorf("systemMetadata: identifier %q is not valid", sm.Identifier)
	case strings.TrimSpace(rec.SourceNode) == "":
		return nil, errors.New("no sourceNode")
	}
	if _, ok := adapter.CanonicalAlgorithm(sm.Checksum.Algorithm); !ok {
		return nil, fmt.Errorf("systemMetadata: checksum algorithm %q is not supported", sm.Checksum.Algorithm)
	}
	s := &adapter.Session{Subject: rec.Subject, Subjects: []string{rec.Subject}, Address: rec.Address, UserAgent: rec.UserAgent}
	return &replicaJob{n: n, s: s, sm: sm, source: rec.SourceNode, cfg: cfg, file: file, resumed: true}, nil
}
