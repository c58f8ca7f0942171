"""An OAI-PMH 2.0 provider over a fixture repository, for the oaipmh mapping's
tests: pyoai's server (oaipmh.server.BatchingServer) answers the protocol, and
http.server carries it. The repository is a JSON file, read again on every
request so that a test can change it between harvests:

    {
      "formats": ["oai_dc", "oai_datacite"],       # offered; oai_dc when absent
      "sets": ["spec", ...],
      "records": [
        {"id": "oai:fixture:1", "datestamp": "2024-01-02T03:04:05Z",
         "sets": ["spec"], "deleted": false,
         "dc": {"title": ["..."], "creator": ["..."], "identifier": ["http://.../landing/1"]},
         "landing": "1"}
      ],
      "landing": {                                 # Signposting landing pages
        "1": {"files": [{"name": "table.csv", "type": "text/csv",
                         "content": "a,b\\n", "modified": "2024-01-02T03:04:05Z",
                         "disposition": "optional attachment file name",
                         "relative": false}],
              "describedby": "optional URL", "head": true}
      }
    }

GET/HEAD /landing/<n> answers with Link headers (one Link header for the
first item, the others comma-separated in a second one, with cite-as and
describedby links among them); /files/<n>/<name> serves a file's bytes with
Content-Length, Last-Modified and single byte ranges. A landing page whose
"head" is false refuses HEAD with 405, as some repositories do. A ListRecords
with a set the repository does not have is a badArgument.

Usage: provider.py PORT DATA.json
"""

import json
import sys
import warnings
import zlib
from datetime import datetime, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

from lxml.etree import SubElement

# pyoai 2.5.0 decodes resumption tokens with cgi.parse_qs, an alias of
# urllib.parse.parse_qs that Python 3.8 removed (and Python 3.13 the whole cgi
# module): put the alias back before pyoai is imported, or every resumption
# token is a Python error.
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import cgi
except ImportError:  # Python 3.13+
    import types
    cgi = sys.modules["cgi"] = types.ModuleType("cgi")
if not hasattr(cgi, "parse_qs"):
    cgi.parse_qs = parse_qs

from oaipmh import common, error, metadata, server  # noqa: E402

BATCH = 2
NS_DATACITE = "http://datacite.org/schema/kernel-4"

DATA = sys.argv[2]


def load():
    with open(DATA, encoding="utf-8") as f:
        data = json.load(f)
    for key, empty in (("records", []), ("sets", []), ("landing", {}), ("formats", ["oai_dc"])):
        if not data.get(key):
            data[key] = empty
    return data


def stamp(s):
    """A naive UTC datetime, as pyoai wants, from an ISO 8601 UTC datestamp."""
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")


def datacite_writer(element, md):
    """A DataCite kernel-4 resource, for the metadataPrefix oai_datacite."""
    m = md.getMap()
    r = SubElement(element, "{%s}resource" % NS_DATACITE, nsmap={None: NS_DATACITE})
    for url in m.get("identifier", []):
        e = SubElement(r, "{%s}identifier" % NS_DATACITE, identifierType="URL")
        e.text = url
    creators = SubElement(r, "{%s}creators" % NS_DATACITE)
    for name in m.get("creator", []):
        c = SubElement(creators, "{%s}creator" % NS_DATACITE)
        SubElement(c, "{%s}creatorName" % NS_DATACITE).text = name
    titles = SubElement(r, "{%s}titles" % NS_DATACITE)
    for t in m.get("title", []):
        SubElement(titles, "{%s}title" % NS_DATACITE).text = t


FORMATS = {
    "oai_dc": ("http://www.openarchives.org/OAI/2.0/oai_dc.xsd",
               "http://www.openarchives.org/OAI/2.0/oai_dc/", server.oai_dc_writer),
    "oai_datacite": ("http://schema.datacite.org/meta/kernel-4/metadata.xsd",
                     NS_DATACITE, datacite_writer),
}


class Repository:
    """pyoai's IBatchingOAI over the JSON file."""

    def __init__(self, base_url):
        self.base_url = base_url
        self.data = load()

    def identify(self):
        stamps = [stamp(r["datestamp"]) for r in self.data["records"]]
        return common.Identify(
            repositoryName="d1bridge fixture",
            baseURL=self.base_url,
            protocolVersion="2.0",
            adminEmails=["fixture@example.org"],
            earliestDatestamp=min(stamps) if stamps else datetime(2000, 1, 1),
            deletedRecord="persistent",
            granularity="YYYY-MM-DDThh:mm:ssZ",
            compression=["identity"])

    def listMetadataFormats(self, identifier=None):
        return [(p, FORMATS[p][0], FORMATS[p][1]) for p in self.data["formats"]]

    def listSets(self, cursor=0, batch_size=10):
        sets = self.data["sets"]
        if not sets:
            raise error.NoSetHierarchyError("This repository has no sets.")
        return [(s, s, None) for s in sets][cursor:cursor + batch_size]

    def _records(self, metadataPrefix, from_, until, set):
        if metadataPrefix not in self.data["formats"]:
            raise error.CannotDisseminateFormatError("Unknown metadata format: %s" % metadataPrefix)
        if set is not None and set not in self.data["sets"]:
            raise error.BadArgumentError("There is no set %r in this repository." % set)
        out = []
        for r in self.data["records"]:
            ds = stamp(r["datestamp"])
            if from_ is not None and ds < from_ or until is not None and ds > until:
                continue
            if set is not None and set not in r.get("sets", []):
                continue
            deleted = bool(r.get("deleted"))
            header = common.Header(None, r["id"], ds, r.get("sets", []), deleted)
            md = None if deleted else common.Metadata(None, r.get("dc", {}))
            out.append((header, md, None))
        return out

    def listRecords(self, metadataPrefix=None, from_=None, until=None, set=None,
                    cursor=0, batch_size=10):
        return self._records(metadataPrefix, from_, until, set)[cursor:cursor + batch_size]

    def listIdentifiers(self, metadataPrefix=None, from_=None, until=None, set=None,
                        cursor=0, batch_size=10):
        recs = self._records(metadataPrefix, from_, until, set)[cursor:cursor + batch_size]
        return [h for h, _, _ in recs]

    def getRecord(self, metadataPrefix, identifier):
        for rec in self._records(metadataPrefix, None, None, None):
            if rec[0].identifier() == identifier:
                return rec
        raise error.IdDoesNotExistError("Id does not exist: %s" % identifier)


def http_date(s):
    return format_datetime(stamp(s).replace(tzinfo=timezone.utc), usegmt=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    def origin(self):
        return "http://" + self.headers.get("Host", "%s:%d" % self.server.server_address)

    def send(self, status, body=b"", headers=(), head=False):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_GET(self):
        self.route(head=False)

    def do_HEAD(self):
        self.route(head=True)

    def route(self, head):
        u = urlsplit(self.path)
        parts = [unquote(p) for p in u.path.split("/") if p]
        if parts == ["oai"]:
            return self.oai(u.query, head)
        if len(parts) == 2 and parts[0] == "landing":
            return self.landing(parts[1], head)
        if len(parts) == 3 and parts[0] == "files":
            return self.file(parts[1], parts[2], head)
        self.send(404, b"not found\n", [("Content-Type", "text/plain")], head)

    def oai(self, query, head):
        args = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        repo = Repository(self.origin() + "/oai")
        registry = metadata.MetadataRegistry()
        for prefix, (_, _, writer) in FORMATS.items():
            registry.registerWriter(prefix, writer)
        srv = server.BatchingServer(repo, metadata_registry=registry, resumption_batch_size=BATCH)
        body = srv.handleRequest(args)
        self.send(200, body, [("Content-Type", "text/xml; charset=utf-8")], head)

    def landing(self, n, head):
        page = load()["landing"].get(n)
        if page is None:
            return self.send(404, b"no such landing page\n", [("Content-Type", "text/plain")], head)
        if head and page.get("head") is False:
            return self.send(405, b"", [("Allow", "GET")], head)
        links = []
        for f in page.get("files", []):
            path = "/files/%s/%s" % (quote(n, safe=""), quote(f["name"], safe=""))
            target = path if f.get("relative") else self.origin() + path
            links.append('<%s>; rel="item"; type="%s"' % (target, f.get("type", "application/octet-stream")))
        links.append('<https://doi.org/10.5072/fixture-%s>; rel="cite-as"' % n)
        if page.get("describedby"):
            links.append('<%s>; rel="describedby"; type="application/xml"' % page["describedby"])
        headers = [("Content-Type", "text/html; charset=utf-8")]
        if links:
            headers.append(("Link", links[0]))
        if len(links) > 1:
            headers.append(("Link", ", ".join(links[1:])))
        body = ("<html><body><h1>Dataset %s</h1></body></html>\n" % n).encode()
        self.send(200, body, headers, head)

    def file(self, n, name, head):
        page = load()["landing"].get(n) or {}
        for f in page.get("files", []):
            if f["name"] == name:
                break
        else:
            return self.send(404, b"no such file\n", [("Content-Type", "text/plain")], head)
        body = f["content"].encode()
        headers = [("Content-Type", f.get("type", "application/octet-stream")),
                   ("Accept-Ranges", "bytes"),
                   ("ETag", '"%d-%d"' % (len(body), zlib.crc32(body)))]
        if f.get("modified"):
            headers.append(("Last-Modified", http_date(f["modified"])))
        if f.get("disposition"):
            headers.append(("Content-Disposition", 'attachment; filename="%s"' % f["disposition"]))
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and "," not in rng:
            first, _, last = rng[len("bytes="):].partition("-")
            try:
                start = int(first)
                end = int(last) if last else len(body) - 1
            except ValueError:
                start, end = -1, -1
            if 0 <= start < len(body) and start <= end:
                end = min(end, len(body) - 1)
                headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end, len(body))))
                return self.send(206, body[start:end + 1], headers, head)
            if start >= len(body):
                return self.send(416, b"", [("Content-Range", "bytes */%d" % len(body))], head)
        self.send(200, body, headers, head)


def main():
    port = int(sys.argv[1])
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
