package rest

import (
	"bufio"
	"mime"
	"mime/multipart"
	"net/http"
	"sync"

	"github.com/d1bridge/d1bridge/adapter"
)

// uploadOps are the operations whose body carries an object's bytes, staged as
// they arrive: the ones Uploads bounds.
var uploadOps = map[string]bool{"MNStorage.create": true, "MNStorage.update": true, "CNCore.create": true}

// Uploads bounds the object uploads in flight, on the whole and per client
// address, so that a few clients cannot hold every handler and staging slot.
// One is shared by the engines a reload replaces, so the bound holds across
// them.
type Uploads struct {
	max, perClient int

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

// NewUploads bounds uploads to max in flight, perClient from one address;
// a bound of 0 or less is no bound.
func NewUploads(max, perClient int) *Uploads {
	return &Uploads{max: max, perClient: perClient, byClient: map[string]int{}}
}

// acquire takes a slot for an upload from client, or refuses at once with
// InsufficientResources (the kind create and update list for a node that
// cannot take the object now). release gives the slot back.
func (u *Uploads) acquire(client string) (release func(), err error) {
	if u == nil {
		return func() {}, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.perClient > 0 && u.byClient[client] >= u.perClient:
		return nil, adapter.Errorf(adapter.InsufficientResources,
			"too many uploads in flight from %s (at most %d at a time); retry when one has ended", client, u.perClient)
	case u.max > 0 && u.total >= u.max:
		return nil, adapter.Errorf(adapter.InsufficientResources,
			"too many uploads in flight on this node (at most %d at a time); retry later", u.max)
	}
	u.total++
	u.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.total--
			if u.byClient[client]--; u.byClient[client] <= 0 {
				delete(u.byClient, client)
			}
		})
	}, nil
}

// uploadReadSize is the read buffer of an upload's body. The multipart reader
// asks for 4 KiB at a time, and so would read the socket 4 KiB at a time,
// 262,144 reads per GiB; through this buffer a read takes what the socket
// holds, up to 256 KiB.
const uploadReadSize = 256 << 10

var uploadReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, uploadReadSize) }}

// multipartReader reads the parts of the request's body: an upload's body
// through a pooled uploadReadSize buffer, given back by the release returned;
// other bodies (small documents) as net/http reads them.
func (r *request) multipartReader() (mr *multipart.Reader, release func(), err error) {
	if !uploadOps[r.op] {
		mr, err = r.Request.MultipartReader()
		return mr, func() {}, err
	}
	mt, params, err := mime.ParseMediaType(r.Request.Header.Get("Content-Type"))
	if err != nil || (mt != "multipart/form-data" && mt != "multipart/mixed") {
		return nil, nil, http.ErrNotMultipart
	}
	boundary := params["boundary"]
	if boundary == "" {
		return nil, nil, http.ErrMissingBoundary
	}
	br := uploadReaders.Get().(*bufio.Reader)
	br.Reset(r.Request.Body)
	return multipart.NewReader(br, boundary), func() {
		br.Reset(nil)
		uploadReaders.Put(br)
	}, nil
}
