package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// commands are the subcommands, in the order usage lists them.
var commands = []struct{ name, args, summary string }{
	{"serve", "[--config FILE]", "serve the DataONE API (the default command)"},
	{"token", "--subject S [--new-key FILE] [--config FILE] [--lifetime D]", "print a token for S signed with the node's signing key"},
	{"import", "[--config FILE] [--manifest FILE] SOURCE... | --from-export DIR [--force]", "create objects from a tree (DIR), a list of URLs (urls:FILE) or a bucket prefix (s3://UPSTREAM/PREFIX)"},
	{"register", "--cn URL [--config FILE] [--node URL]", "register this node with a coordinating node, or update its registration"},
	{"backup", "[--config FILE] [--verify=false] DIR", "write a consistent snapshot of the catalog (and the embedded store's bytes) to DIR"},
	{"restore", "[--config FILE] [--force] DIR", "bring back a backup or an export into a stopped node, verified"},
	{"export", "[--config FILE] DIR", "write every object's bytes and system metadata to DIR as a DataONE hashstore"},
	{"probe", "[--timeout D] [URL]", "exit 0 when URL (default http://127.0.0.1:8080/readyz) answers 200: a container health check"},
	{"config check", "FILE", "report every problem of a configuration file"},
	{"version", "", "print the version"},
	{"help", "", "print this help"},
}

// usage prints every subcommand, one line each.
func usage(w io.Writer) {
	fmt.Fprintln(w, "d1bridge serves the DataONE member and coordinating node API in front of existing stores.")
	fmt.Fprintln(w, "\nUsage:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  d1bridge %s\t%s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nEvery key of the configuration can be set from the environment (D1BRIDGE_NODE_BASEURL for")
	fmt.Fprintln(w, "node.baseURL). Run d1bridge COMMAND --help for a command's flags.")
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// commandUsage prints one subcommand's line and the flags of fs (nil: none).
func commandUsage(w io.Writer, name string, fs *flag.FlagSet) {
	for _, c := range commands {
		if c.name == name {
			fmt.Fprintf(w, "Usage: d1bridge %s\n\n%s%s.\n", strings.TrimSpace(c.name+" "+c.args), strings.ToUpper(c.summary[:1]), c.summary[1:])
		}
	}
	if fs != nil {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// newFlags is the flag set of a subcommand; parseFlags prints its errors.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args; on -h or --help it prints the command's usage to
// stdout and answers help.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(stdout, fs.Name(), fs)
			return true, nil
		}
		return false, fmt.Errorf("%s: %w (d1bridge %s --help)", fs.Name(), err, fs.Name())
	}
	return false, nil
}
