package datapackage

import (
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// officialFormatList names DataONE's object format list in messages: the
// copy adapter embeds (shared/dataone/objectFormatList.xml).
const officialFormatList = "objectFormatList.xml"

func officialFormatIDs(t *testing.T) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for _, f := range adapter.OfficialFormats().List().ObjectFormat {
		ids[f.FormatID] = true
	}
	if len(ids) < 100 {
		t.Fatalf("%s lists only %d formats", officialFormatList, len(ids))
	}
	return ids
}

// TestFormatsAreOfficial: every formatId FormatForName can return is in
// DataONE's list, since the CN refuses any other.
func TestFormatsAreOfficial(t *testing.T) {
	official := officialFormatIDs(t)
	if !official[FormatForName("x.unknown-extension")] {
		t.Errorf("the unknown format %q is not official", FormatForName("x.unknown-extension"))
	}
	for ext, id := range formatsByExtension {
		if !official[id] {
			t.Errorf("%s -> %q is not in %s", ext, id, officialFormatList)
		}
		if got := FormatForName("dir/file" + ext); got != id {
			t.Errorf("FormatForName(file%s) = %q, want %q", ext, got, id)
		}
	}
}

func TestFormatForName(t *testing.T) {
	cases := map[string]string{
		"data.csv":            "text/csv",
		"DATA.CSV":            "text/csv",
		"notes.txt":           "text/plain",
		"table.tsv":           "text/tsv",
		"a/b/c.json":          "application/json",
		"meta.xml":            "application/xml",
		"paper.pdf":           "application/pdf",
		"fig.png":             "image/png",
		"photo.JPG":           "image/jpeg",
		"photo.jpeg":          "image/jpeg",
		"scan.tif":            "image/tiff",
		"scan.tiff":           "image/tiff",
		"bundle.zip":          "application/zip",
		"archive.tar.gz":      "application/x-gzip",
		"model.nc":            "netCDF-4",
		"sheet.xlsx":          "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"sheet.xls":           "application/vnd.ms-excel",
		"analysis.R":          "application/R",
		"analysis.r":          "application/R",
		"script.py":           "application/x-python",
		"README.md":           "text/markdown",
		"index.html":          "text/html",
		"noextension":         "application/octet-stream",
		"weird.xyz":           "application/octet-stream",
		".hidden":             "application/octet-stream",
		"dir.with.dots/plain": "application/octet-stream",
	}
	for name, want := range cases {
		if got := FormatForName(name); got != want {
			t.Errorf("FormatForName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestUniqueName: a name listed again gets -2, -3... before its extension,
// and never a name given before.
func TestUniqueName(t *testing.T) {
	names := map[string]bool{}
	var got []string
	for _, name := range []string{"readme.txt", "readme.txt", "readme-2.txt", "readme.txt", "data", "data"} {
		got = append(got, UniqueName(names, name))
	}
	if want := []string{"readme.txt", "readme-2.txt", "readme-2-2.txt", "readme-3.txt", "data", "data-2"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}
