package upstream

import "io"

// CountingReader is a request body that counts the bytes read from the
// caller's reader and keeps its error, so that a store's Put can return the
// caller's failure as it is rather than as the upstream's.
type CountingReader struct {
	R   io.Reader
	N   int64
	Err error
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	if err != nil && err != io.EOF {
		c.Err = err
	}
	return n, err
}
