package node

// SetReindexPage sets the page of batch reindex, and returns what restores it.
func SetReindexPage(n int) func() {
	old := reindexPage
	reindexPage = n
	return func() { reindexPage = old }
}

// WalkList is walkList, for the tests of its paging.
var WalkList = walkList
