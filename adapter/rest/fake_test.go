package rest

import (
	"context"
	"io"
	"strings"
	"sync"

	"github.com/d1bridge/d1bridge/adapter"
)

// fakeNode is a member node whose every method returns err when it is set, and
// otherwise answers from meta and body. It records the last call.
type fakeNode struct {
	mu   sync.Mutex
	err  error
	meta *adapter.SystemMetadata
	body string
	last string
	// seekable makes Get's body an io.ReadSeeker, as stores with ranges give.
	seekable bool
	staged   []string // the algorithms the last Stage was asked for
}

type seekNopCloser struct{ *strings.Reader }

func (seekNopCloser) Close() error { return nil }

func newFake() *fakeNode {
	return &fakeNode{body: "hello", meta: &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: "x/y", FormatID: "text/plain", Size: 5,
		Checksum:     adapter.Checksum{Algorithm: "MD5", Value: "5d41402abc4b2a76b9719d911017c592"},
		RightsHolder: "public", DateUploaded: adapter.Now(), DateSysMetadataModified: adapter.Now(),
	}}
}

func (f *fakeNode) call(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = name
	return f.err
}

func (f *fakeNode) Ping(ctx context.Context) error { return f.call("Ping") }
func (f *fakeNode) LogRecords(ctx context.Context, s *adapter.Session, q adapter.LogQuery) (*adapter.Log, error) {
	return &adapter.Log{Slice: adapter.Slice{Start: q.Start}}, f.call("LogRecords")
}
func (f *fakeNode) Get(ctx context.Context, s *adapter.Session, id string) (*adapter.Object, error) {
	if err := f.call("Get"); err != nil {
		return nil, err
	}
	if f.seekable {
		return &adapter.Object{Meta: f.meta, Body: seekNopCloser{strings.NewReader(f.body)}}, nil
	}
	// A stream, as a network store's body: no WriteTo, no Seek.
	return &adapter.Object{Meta: f.meta, Body: io.NopCloser(struct{ io.Reader }{strings.NewReader(f.body)})}, nil
}
func (f *fakeNode) SystemMetadata(ctx context.Context, s *adapter.Session, id string) (*adapter.SystemMetadata, error) {
	if err := f.call("SystemMetadata"); err != nil {
		return nil, err
	}
	c := f.meta.Clone()
	c.Identifier = id
	return c, nil
}
func (f *fakeNode) Checksum(ctx context.Context, s *adapter.Session, pid, alg string) (*adapter.Checksum, error) {
	return &f.meta.Checksum, f.call("Checksum")
}
func (f *fakeNode) ListObjects(ctx context.Context, s *adapter.Session, q adapter.ListQuery) (*adapter.ObjectList, error) {
	return &adapter.ObjectList{Slice: adapter.Slice{Start: q.Start}}, f.call("ListObjects")
}
func (f *fakeNode) SynchronizationFailed(ctx context.Context, s *adapter.Session, r *adapter.Exception) error {
	return f.call("SynchronizationFailed")
}
func (f *fakeNode) SetAccessPolicy(ctx context.Context, s *adapter.Session, pid string, p *adapter.AccessPolicy, v uint64) error {
	return f.call("SetAccessPolicy")
}
func (f *fakeNode) SystemMetadataChanged(ctx context.Context, s *adapter.Session, id string, v uint64, t adapter.Time) error {
	return f.call("SystemMetadataChanged")
}
func (f *fakeNode) Stage(ctx context.Context, body io.Reader, algs []string) (*adapter.Upload, error) {
	n, _ := io.Copy(io.Discard, body)
	f.mu.Lock()
	f.staged = algs
	f.mu.Unlock()
	return &adapter.Upload{Size: n, Ref: "r"}, f.call("Stage")
}
func (f *fakeNode) Discard(ctx context.Context, u *adapter.Upload) error { return nil }
func (f *fakeNode) Create(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	return sm, f.call("Create")
}
func (f *fakeNode) Update(ctx context.Context, s *adapter.Session, id string, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	return sm, f.call("Update")
}
func (f *fakeNode) Delete(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return id, f.call("Delete")
}
func (f *fakeNode) Archive(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return id, f.call("Archive")
}
func (f *fakeNode) UpdateSystemMetadata(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata) error {
	return f.call("UpdateSystemMetadata")
}
func (f *fakeNode) GenerateIdentifier(ctx context.Context, s *adapter.Session, scheme, fragment string) (string, error) {
	return "urn:uuid:1", f.call("GenerateIdentifier")
}

func (f *fakeNode) ReserveIdentifier(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return id, f.call("ReserveIdentifier")
}
func (f *fakeNode) HasReservation(ctx context.Context, s *adapter.Session, subject, id string) error {
	return f.call("HasReservation")
}
func (f *fakeNode) RegisterSystemMetadata(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata) (string, error) {
	return sm.Identifier, f.call("RegisterSystemMetadata")
}
func (f *fakeNode) SetObsoletedBy(ctx context.Context, s *adapter.Session, pid, by string, v uint64) error {
	return f.call("SetObsoletedBy")
}
func (f *fakeNode) Resolve(ctx context.Context, s *adapter.Session, id string) (*adapter.ObjectLocationList, error) {
	return &adapter.ObjectLocationList{Identifier: id, ObjectLocation: []adapter.ObjectLocation{{
		NodeIdentifier: "urn:node:X", BaseURL: "http://x/mn", Version: []string{"v2"}, URL: "http://x/mn/v2/object/" + id}}}, f.call("Resolve")
}
func (f *fakeNode) SetRightsHolder(ctx context.Context, s *adapter.Session, pid, subject string, v uint64) error {
	return f.call("SetRightsHolder")
}
func (f *fakeNode) SetReplicationStatus(ctx context.Context, s *adapter.Session, pid, node, status string, failure *adapter.Exception) error {
	return f.call("SetReplicationStatus")
}
func (f *fakeNode) UpdateReplicationMetadata(ctx context.Context, s *adapter.Session, pid string, r *adapter.Replica, v uint64) error {
	return f.call("UpdateReplicationMetadata")
}
func (f *fakeNode) SetReplicationPolicy(ctx context.Context, s *adapter.Session, pid string, p *adapter.ReplicationPolicy, v uint64) error {
	return f.call("SetReplicationPolicy")
}
func (f *fakeNode) IsNodeAuthorized(ctx context.Context, s *adapter.Session, target, pid string) error {
	return f.call("IsNodeAuthorized")
}
func (f *fakeNode) DeleteReplicationMetadata(ctx context.Context, s *adapter.Session, pid, node string, v uint64) error {
	return f.call("DeleteReplicationMetadata")
}
