package node

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// GroupFiles is the dataset source of a file tree: each folder depth levels
// below the root is a dataset, holding every file under it. The tree's
// objects are those whose keys begin with "/" (the store's holdings, keyed by
// their path); the node's own objects, listed under its keys, are left out,
// and so are files above the datasets' level. The lister must list a
// folder's files together (in path order, or depth first), which object
// stores and directory walks do; a folder that comes back fails the walk. A
// folder the lister could not read (Found.Problem) fails its dataset, or,
// above the datasets' level, is a failed dataset without an id, which keeps
// the pass from archiving anything.
func GroupFiles(l Lister, depth int) DatasetSource {
	return &fileTree{l: l, depth: max(depth, 1)}
}

type fileTree struct {
	l     Lister
	depth int
}

func (*fileTree) Exhaustive() bool { return true }

// Walk lists the whole tree: a store cannot say which folders changed, and
// a dataset is compared with its registered version by one catalog lookup.
func (t *fileTree) Walk(ctx context.Context, _ time.Time, fn func(*Dataset) error) error {
	var cur *Dataset
	done := map[string]bool{}
	emit := func() error {
		if cur == nil {
			return nil
		}
		d := cur
		cur = nil
		done[d.ID] = true
		return fn(d)
	}
	cursor := ""
	asked := map[string]bool{"": true}
	for {
		page, next, err := t.l.List(ctx, time.Time{}, cursor)
		if err != nil {
			return err
		}
		for _, f := range page {
			if f.Problem != nil {
				// A folder that cannot be read fails the dataset it is in,
				// or, above the datasets' level, the pass: its files are not
				// gone, and must not be archived as if they were.
				p := strings.Trim(f.FileName, "/")
				segs := strings.SplitN(p, "/", t.depth+1)
				if len(segs) < t.depth || p == "" {
					if err := fn(&Dataset{Problem: fmt.Errorf("%q: %w", p, f.Problem)}); err != nil {
						return err
					}
					continue
				}
				id := strings.Join(segs[:t.depth], "/")
				if cur == nil || cur.ID != id {
					if err := emit(); err != nil {
						return err
					}
					cur = &Dataset{ID: id}
				}
				if cur.Problem == nil {
					cur.Problem = fmt.Errorf("%q: %w", p, f.Problem)
				}
				continue
			}
			if !strings.HasPrefix(f.Key, "/") {
				continue
			}
			p := strings.TrimPrefix(cmp.Or(f.FileName, f.Key), "/")
			segs := strings.SplitN(p, "/", t.depth+1)
			if len(segs) <= t.depth {
				continue // above the datasets' level
			}
			id := strings.Join(segs[:t.depth], "/")
			if cur == nil || cur.ID != id {
				if err := emit(); err != nil {
					return err
				}
				if done[id] {
					return adapter.Errorf(adapter.ServiceFailure, "the store listed files of %q again after other folders: its listing is not in path order", id)
				}
				cur = &Dataset{ID: id}
			}
			f.FileName = segs[t.depth]
			cur.Files = append(cur.Files, f)
			if f.Modified.After(cur.Modified) {
				cur.Modified = f.Modified
			}
		}
		if next == "" {
			return emit()
		}
		if asked[next] {
			return adapter.Errorf(adapter.ServiceFailure, "the store answered the page cursor %q with %q, a page listed before: its paging goes round", cursor, next)
		}
		asked[next] = true
		cursor = next
	}
}

// GroupRecords is the dataset source of a store whose records name their
// dataset (Found.Dataset): a legacy repository's API whose file records point
// at their dataset's record. Objects that name no dataset are left out: they
// are no dataset's, and the flat harvest of objects alone does not run over
// a store harvested as datasets.
//
// A dataset must come whole, and a listing of what changed gives only the
// objects that changed, not their datasets' others: every walk lists the
// whole store (it is Exhaustive), and an unchanged dataset costs one catalog
// lookup. The grouping is held in memory until the listing ends, one Found
// per object (a few hundred bytes each): fine up to some hundred thousand
// objects. Datasets come sorted by id, each file named by its FileName, or
// its key when the store gives none, and the dataset's Modified is its
// newest file's. An object whose description cannot be read fails its
// dataset (which stays as registered until a later walk reads it), or, when
// its dataset is unknown, is reported as a failed dataset without an id,
// which keeps the pass from archiving anything. Two objects of one dataset
// with the same file name fail it too: their identifiers would be the same.
func GroupRecords(l Lister) DatasetSource {
	return recordGroups{l}
}

type recordGroups struct{ l Lister }

func (recordGroups) Exhaustive() bool { return true }

func (g recordGroups) Walk(ctx context.Context, _ time.Time, fn func(*Dataset) error) error {
	sets := map[string]*Dataset{}
	var unknown []*Dataset // problems of objects whose dataset is unknown
	cursor := ""
	asked := map[string]bool{"": true}
	for {
		page, next, err := g.l.List(ctx, time.Time{}, cursor)
		if err != nil {
			return err
		}
		for _, f := range page {
			if f.Dataset == "" {
				if f.Problem != nil {
					unknown = append(unknown, &Dataset{Problem: f.Problem})
				}
				continue
			}
			d := sets[f.Dataset]
			if d == nil {
				d = &Dataset{ID: f.Dataset}
				sets[f.Dataset] = d
			}
			if f.Problem != nil {
				if d.Problem == nil {
					d.Problem = fmt.Errorf("object %q: %w", f.Key, f.Problem)
				}
				continue
			}
			f.FileName = cmp.Or(f.FileName, f.Key)
			d.Files = append(d.Files, f)
			if f.Modified.After(d.Modified) {
				d.Modified = f.Modified
			}
		}
		if next == "" {
			break
		}
		if asked[next] {
			return adapter.Errorf(adapter.ServiceFailure, "the store answered the page cursor %q with %q, a page listed before: its paging goes round", cursor, next)
		}
		asked[next] = true
		cursor = next
	}
	for _, id := range slices.Sorted(maps.Keys(sets)) {
		d := sets[id]
		delete(sets, id)
		slices.SortFunc(d.Files, func(a, b Found) int {
			return cmp.Or(strings.Compare(a.FileName, b.FileName), strings.Compare(a.Key, b.Key))
		})
		for i := 1; i < len(d.Files) && d.Problem == nil; i++ {
			if a, b := d.Files[i-1], d.Files[i]; a.FileName == b.FileName {
				d.Problem = fmt.Errorf("objects %q and %q have the same file name %q", a.Key, b.Key, a.FileName)
			}
		}
		if d.Problem != nil {
			d.Files = nil
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	for _, d := range unknown {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}
