package datapackage

import (
	"path"
	"strconv"
	"strings"
)

// formatOctetStream is DataONE's format of bytes nothing more is known of.
const formatOctetStream = "application/octet-stream"

// formatsByExtension maps a lowercase file extension to its DataONE formatId.
// Every id is in DataONE's object format list (formats_test.go checks): the
// CN refuses system metadata naming any other. Where the list has several
// formats for one extension, the most common is chosen: .nc is netCDF-4 (the
// format netCDF writes by default), .xml application/xml (text/xml is the
// older name), .mat has no entry (its MATLAB version is in the file).
var formatsByExtension = map[string]string{
	// Text and tables
	".txt":  "text/plain",
	".text": "text/plain",
	".csv":  "text/csv",
	".tsv":  "text/tsv",
	".tab":  "text/tsv",
	".md":   "text/markdown",
	".rmd":  "text/x-rmarkdown",
	".html": "text/html",
	".htm":  "text/html",
	".rtf":  "application/rtf",
	".json": "application/json",
	".xml":  "application/xml",
	// Office documents
	".pdf":  "application/pdf",
	".doc":  "application/msword",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xls":  "application/vnd.ms-excel",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".xlsb": "application/vnd.ms-excel.sheet.binary.macroEnabled.12",
	".ppt":  "application/vnd.ms-powerpoint",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".ps":   "application/postscript",
	".eps":  "application/postscript",
	// Images, audio, video
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".jp2":  "image/jp2",
	".gif":  "image/gif",
	".bmp":  "image/bmp",
	".svg":  "image/svg+xml",
	".tif":  "image/tiff",
	".tiff": "image/tiff",
	".wav":  "audio/x-wav",
	".mp3":  "audio/mpeg",
	".wma":  "audio/x-ms-wma",
	".mp4":  "video/mp4",
	".mov":  "video/quicktime",
	".avi":  "video/avi",
	".mpg":  "video/mpeg",
	".mpeg": "video/mpeg",
	".wmv":  "video/x-ms-wmv",
	// Archives
	".zip": "application/zip",
	".gz":  "application/x-gzip",
	".tgz": "application/x-gzip",
	".tar": "application/x-tar",
	".bz2": "application/x-bzip2",
	".rar": "application/x-rar-compressed",
	// Scientific data
	".nc":      "netCDF-4",
	".h4":      "application/x-hdf",
	".hdf":     "application/x-hdf",
	".h5":      "application/x-hdf5",
	".hdf5":    "application/x-hdf5",
	".cdf":     "application/x-cdf",
	".fits":    "application/fits",
	".fit":     "application/fits",
	".asdf":    "ASDF",
	".parquet": "application/vnd.apache.parquet",
	".sqlite":  "application/vnd.sqlite3",
	".sqlite3": "application/vnd.sqlite3",
	".fasta":   "application/x-fasta",
	".fa":      "application/x-fasta",
	".nex":     "nexus/1997",
	".nxs":     "nexus/1997",
	".nb":      "application/mathematica",
	// Geospatial
	".kml":     "application/vnd.google-earth.kml+xml",
	".kmz":     "application/vnd.google-earth.kmz",
	".geojson": "application/geo+json",
	".gpkg":    "application/geopackage+sqlite3",
	".gpx":     "application/gpx+xml",
	// Linked data
	".rdf":    "application/rdf+xml",
	".ttl":    "text/turtle",
	".n3":     "text/n3",
	".jsonld": "application/json-ld",
	// Code
	".r":     "application/R",
	".py":    "application/x-python",
	".m":     "application/MATLAB",
	".sas":   "application/SAS",
	".sh":    "application/x-sh",
	".ipynb": "application/x-ipynb+json",
}

// FormatForName is the DataONE formatId of a data file by its name's
// extension; application/octet-stream when unknown.
func FormatForName(name string) string {
	ext := strings.ToLower(path.Ext(path.Base(name)))
	if id, ok := formatsByExtension[ext]; ok {
		return id
	}
	return formatOctetStream
}

// UniqueName is name, or name-2, name-3... before its extension when a file
// of the dataset already has it: a file's name ends its identifier, and a
// source may list two under one name. It records the name it returns.
func UniqueName(names map[string]bool, name string) string {
	out := name
	ext := path.Ext(name)
	for i := 2; names[out]; i++ {
		out = strings.TrimSuffix(name, ext) + "-" + strconv.Itoa(i) + ext
	}
	names[out] = true
	return out
}

// indexedFormats are the science metadata formats the DataONE CN indexes
// (its index processor's document parsers).
var indexedFormats = map[string]bool{
	"eml://ecoinformatics.org/eml-2.0.0":       true,
	"eml://ecoinformatics.org/eml-2.0.1":       true,
	"eml://ecoinformatics.org/eml-2.1.0":       true,
	"eml://ecoinformatics.org/eml-2.1.1":       true,
	FormatEML220:                               true,
	FormatISO19139:                             true,
	"http://www.isotc211.org/2005/gmd-noaa":    true,
	"http://www.isotc211.org/2005/gmd-pangaea": true,
	"FGDC-STD-001-1998":                        true,
	"FGDC-STD-001.1-1999":                      true,
	"FGDC-STD-001.2-1999":                      true,
	formatDataCite30:                           true,
	FormatDataCite31:                           true,
	formatOneDCX:                               true,
	FormatOAIDC:                                true,
	FormatSchemaOrg:                            true,
}

// Indexed tells whether the DataONE CN indexes science metadata of formatID.
func Indexed(formatID string) bool { return indexedFormats[formatID] }
