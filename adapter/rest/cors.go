package rest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// CORS is what browser pages on other origins may do (the cors key).
type CORS struct {
	AllowedOrigins   []string // "*" for any; empty: CORS off
	AllowedMethods   []string
	AllowedHeaders   []string
	ExposedHeaders   []string
	AllowCredentials bool
	MaxAge           time.Duration // 0: no Access-Control-Max-Age
}

// middleware answers the preflight (OPTIONS with Origin and
// Access-Control-Request-Method) of every path itself, 204, and adds the
// Access-Control-* headers to the answers of requests from an allowed origin.
// A request from another origin gets no CORS header, so the browser keeps
// its answer from the page; a preflight from it is answered 204 all the same.
func (o *CORS) middleware() gin.HandlerFunc {
	anyOrigin := slices.Contains(o.AllowedOrigins, "*")
	methods := strings.Join(o.AllowedMethods, ", ")
	headers := strings.Join(o.AllowedHeaders, ", ")
	exposed := strings.Join(o.ExposedHeaders, ", ")
	maxAge := strconv.Itoa(int(o.MaxAge / time.Second))
	return func(c *gin.Context) {
		// Whether an answer carries Access-Control-Allow-Origin depends on the
		// request's Origin, so every answer says so, those to requests without
		// one included: a cache must not serve a plain download's answer to a
		// page's CORS request (Fetch, "CORS protocol and HTTP caches").
		h := c.Writer.Header()
		h.Add("Vary", "Origin")
		origin := c.GetHeader("Origin")
		if origin == "" {
			c.Next()
			return
		}
		preflight := c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != ""
		allowed := anyOrigin || slices.Contains(o.AllowedOrigins, origin)
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if allowed && slices.Contains(o.AllowedMethods, c.GetHeader("Access-Control-Request-Method")) {
				o.allowOrigin(h, origin, anyOrigin)
				h.Set("Access-Control-Allow-Methods", methods)
				if headers != "" {
					h.Set("Access-Control-Allow-Headers", headers)
				}
				if o.MaxAge > 0 {
					h.Set("Access-Control-Max-Age", maxAge)
				}
			}
			c.AbortWithStatus(http.StatusNoContent)
			return
		}
		if allowed {
			o.allowOrigin(h, origin, anyOrigin)
			if exposed != "" {
				h.Set("Access-Control-Expose-Headers", exposed)
			}
		}
		c.Next()
	}
}

func (o *CORS) allowOrigin(h http.Header, origin string, anyOrigin bool) {
	if anyOrigin && !o.AllowCredentials {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if o.AllowCredentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}
