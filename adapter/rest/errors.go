package rest

import . "github.com/d1bridge/d1bridge/adapter"

// codes maps the kinds an operation may raise to their default detail codes.
type codes map[Kind]string

// opErrors lists, per operation, the exception kinds it may raise (the seed's
// tables, and API.md §3–4 for operations the seed leaves out) with the spec's
// detail codes; "0" where the spec gives none. The writer turns any other kind
// into a permitted one (see permitted).
var opErrors = map[string]codes{
	// MN core
	"MNCore.ping":                    {NotImplemented: "2041", ServiceFailure: "2042", InsufficientResources: "2045"},
	"MNCore.getLogRecords":           {NotAuthorized: "1460", InvalidRequest: "1480", ServiceFailure: "1490", InvalidToken: "1470", NotImplemented: "1461"},
	"MNCore.getCapabilities":         {NotImplemented: "2160", ServiceFailure: "2162"},
	"MNCore.getObjectStatistics":     {ServiceFailure: "0", NotImplemented: "0", InvalidRequest: "0", NotAuthorized: "0", InvalidToken: "0"},
	"MNCore.getOperationsStatistics": {ServiceFailure: "0", NotImplemented: "0", InvalidRequest: "0", NotAuthorized: "0", InvalidToken: "0"},
	"MNCore.getStatus":               {ServiceFailure: "0", NotImplemented: "0", NotAuthorized: "0", InvalidToken: "0"},
	// MN read
	"MNRead.get":                   {NotAuthorized: "1000", NotImplemented: "1001", InvalidToken: "1010", NotFound: "1020", ServiceFailure: "1030", InvalidRequest: "0"},
	"MNRead.getSystemMetadata":     {NotAuthorized: "1040", NotImplemented: "1041", InvalidToken: "1050", NotFound: "1060", ServiceFailure: "1090", InvalidRequest: "0"},
	"MNRead.describe":              {NotAuthorized: "1360", NotImplemented: "1361", InvalidToken: "1370", NotFound: "1380", ServiceFailure: "1390", InvalidRequest: "0"},
	"MNRead.getChecksum":           {NotAuthorized: "1400", NotImplemented: "1401", InvalidRequest: "1402", ServiceFailure: "1410", NotFound: "1420", InvalidToken: "1430"},
	"MNRead.listObjects":           {NotAuthorized: "1520", InvalidToken: "1530", InvalidRequest: "1540", NotImplemented: "1560", ServiceFailure: "1580"},
	"MNRead.synchronizationFailed": {NotImplemented: "2160", ServiceFailure: "2161", NotAuthorized: "2162", InvalidToken: "2164", InvalidRequest: "0"},
	// MN authorization
	"MNAuthorization.isAuthorized":    {ServiceFailure: "1760", InvalidRequest: "1761", NotImplemented: "1780", NotFound: "1800", NotAuthorized: "1820", InvalidToken: "1840"},
	"MNAuthorization.setAccessPolicy": {NotFound: "4400", NotImplemented: "4401", InvalidRequest: "4402", VersionMismatch: "4403", InvalidToken: "4410", NotAuthorized: "4420", ServiceFailure: "4430"},
	"MNStorage.systemMetadataChanged": {NotImplemented: "1330", NotAuthorized: "1331", InvalidToken: "1332", ServiceFailure: "1333", InvalidRequest: "1334"},
	// MN storage
	"MNStorage.create":               {NotImplemented: "1101", InvalidRequest: "1102", NotAuthorized: "1100", InvalidToken: "1110", IdentifierNotUnique: "1120", UnsupportedType: "1140", InsufficientResources: "1160", InvalidSystemMetadata: "1180", ServiceFailure: "1190", NotFound: "0"},
	"MNStorage.update":               {NotAuthorized: "1200", NotImplemented: "1201", InvalidRequest: "1202", InvalidToken: "1210", IdentifierNotUnique: "1220", UnsupportedType: "1240", InsufficientResources: "1260", NotFound: "1280", InvalidSystemMetadata: "1300", ServiceFailure: "1310"},
	"MNStorage.generateIdentifier":   {InvalidToken: "2190", ServiceFailure: "2191", NotAuthorized: "2192", InvalidRequest: "2193", NotImplemented: "2194"},
	"MNStorage.delete":               {NotAuthorized: "2900", NotFound: "2901", ServiceFailure: "2902", InvalidToken: "2903", NotImplemented: "2904", InvalidRequest: "0"},
	"MNStorage.archive":              {NotAuthorized: "2910", NotFound: "2911", ServiceFailure: "2912", InvalidToken: "2913", NotImplemented: "2914", InvalidRequest: "0"},
	"MNStorage.updateSystemMetadata": {NotImplemented: "4866", NotAuthorized: "4867", ServiceFailure: "4868", InvalidRequest: "4869", InvalidSystemMetadata: "4956", InvalidToken: "4957"},
	"MNStorage.publish":              {InvalidToken: "0", ServiceFailure: "0", NotAuthorized: "0", NotFound: "0", NotImplemented: "0", InvalidRequest: "0", IdentifierNotUnique: "0", UnsupportedType: "0", InsufficientResources: "0", InvalidSystemMetadata: "0"},
	"MNStorage.publishIdentifier":    {InvalidToken: "0", ServiceFailure: "0", NotAuthorized: "0", NotFound: "0", NotImplemented: "0", InvalidRequest: "0", IdentifierNotUnique: "0", UnsupportedType: "0", InsufficientResources: "0", InvalidSystemMetadata: "0"},
	// MN replication
	"MNReplication.replicate":  {NotImplemented: "2150", ServiceFailure: "2151", NotAuthorized: "2152", InvalidRequest: "2153", InsufficientResources: "2154", UnsupportedType: "2155", InvalidToken: "2156", IdentifierNotUnique: "0"},
	"MNReplication.getReplica": {NotImplemented: "2180", ServiceFailure: "2181", NotAuthorized: "2182", InvalidToken: "2183", InsufficientResources: "2184", NotFound: "2185", InvalidRequest: "0"},
	// MN optional tiers and v2 administration
	"MNPackage.getPackage":     {InvalidToken: "2870", ServiceFailure: "2871", NotAuthorized: "2872", InvalidRequest: "2873", NotImplemented: "2874", NotFound: "2875"},
	"MNView.listViews":         {InvalidToken: "2840", ServiceFailure: "2841", NotAuthorized: "2842", InvalidRequest: "2843", NotImplemented: "2844"},
	"MNView.view":              {InvalidToken: "2830", ServiceFailure: "2831", NotAuthorized: "2832", InvalidRequest: "2833", NotImplemented: "2834", NotFound: "2835"},
	"MNAuthentication.token":   {InvalidToken: "0", ServiceFailure: "0", NotAuthorized: "0", NotImplemented: "0"},
	"MNAuthentication.whoami":  {InvalidToken: "0", ServiceFailure: "0", NotAuthorized: "0", NotImplemented: "0"},
	"MNAdmin.reindex":          {InvalidRequest: "0", ServiceFailure: "0", NotAuthorized: "0", NotImplemented: "0"},
	"MNAdmin.updateIdMetadata": {ServiceFailure: "0", NotAuthorized: "0", InvalidRequest: "0", NotImplemented: "0"},
	// CN core
	"CNCore.ping":                   {NotImplemented: "2041", ServiceFailure: "2042", InsufficientResources: "2045"},
	"CNCore.getCapabilities":        {NotImplemented: "4802", ServiceFailure: "4803"},
	"CNCore.listNodes":              {NotImplemented: "4800", ServiceFailure: "4801"},
	"CNCore.listFormats":            {NotImplemented: "4840", ServiceFailure: "4841"},
	"CNCore.getFormat":              {NotImplemented: "4845", ServiceFailure: "4846", NotFound: "4848", InvalidRequest: "0"},
	"CNCore.listChecksumAlgorithms": {NotImplemented: "4880", ServiceFailure: "4881"},
	"CNCore.getLogRecords":          {NotAuthorized: "1460", NotImplemented: "1461", InvalidToken: "1470", InvalidRequest: "1480", InsufficientResources: "1481", ServiceFailure: "1490"},
	"CNCore.reserveIdentifier":      {NotAuthorized: "4180", InvalidToken: "4190", NotImplemented: "4191", InvalidRequest: "4200", ServiceFailure: "4210", IdentifierNotUnique: "4210"},
	"CNCore.hasReservation":         {NotImplemented: "4920", ServiceFailure: "4921", InvalidToken: "4922", NotFound: "4923", NotAuthorized: "4924", InvalidRequest: "4925"},
	"CNCore.generateIdentifier":     {NotAuthorized: "4180", InvalidToken: "4190", NotImplemented: "4191", InvalidRequest: "4200", ServiceFailure: "4210"},
	"CNCore.create":                 {NotAuthorized: "1100", IdentifierNotUnique: "1120", NotImplemented: "4890", InvalidRequest: "4891", ServiceFailure: "4893", InvalidToken: "4894", UnsupportedType: "4895", InvalidSystemMetadata: "4896", InsufficientResources: "4897"},
	"CNCore.registerSystemMetadata": {NotImplemented: "4860", NotAuthorized: "4861", ServiceFailure: "4862", InvalidRequest: "4863", InvalidSystemMetadata: "4864"},
	"CNCore.updateSystemMetadata":   {NotImplemented: "4866", NotAuthorized: "4867", ServiceFailure: "4868", InvalidRequest: "4869", InvalidSystemMetadata: "4956", InvalidToken: "4957"},
	"CNCore.setObsoletedBy":         {NotImplemented: "4940", ServiceFailure: "4941", InvalidRequest: "4942", InvalidToken: "4943", NotFound: "4944", NotAuthorized: "4945", VersionMismatch: "4946"},
	"CNCore.delete":                 {NotAuthorized: "4960", NotFound: "4961", ServiceFailure: "4962", InvalidToken: "4963", NotImplemented: "4964", InvalidRequest: "0"},
	"CNCore.archive":                {NotAuthorized: "4970", NotFound: "4971", ServiceFailure: "4972", InvalidToken: "4973", NotImplemented: "4974", InvalidRequest: "0"},
	// CN read
	"CNRead.get":               {NotAuthorized: "1000", NotImplemented: "1001", InvalidToken: "1010", NotFound: "1020", ServiceFailure: "1030", InvalidRequest: "0"},
	"CNRead.getSystemMetadata": {NotAuthorized: "1040", NotImplemented: "1041", InvalidToken: "1050", NotFound: "1060", ServiceFailure: "1090", InvalidRequest: "0"},
	"CNRead.describe":          {NotImplemented: "4930", ServiceFailure: "4931", InvalidToken: "4932", NotFound: "4933", NotAuthorized: "4934", InvalidRequest: "0"},
	"CNRead.resolve":           {NotAuthorized: "4120", InvalidToken: "4130", NotImplemented: "4131", NotFound: "4140", ServiceFailure: "4150", InvalidRequest: "0"},
	"CNRead.assertRelation":    {InvalidToken: "0", ServiceFailure: "0", NotAuthorized: "0", NotFound: "0", InvalidRequest: "0", NotImplemented: "0"},
	"CNRead.getChecksum":       {NotAuthorized: "1400", InvalidRequest: "1402", NotImplemented: "1402", ServiceFailure: "1410", NotFound: "1420", InvalidToken: "1430"},
	"CNRead.listObjects":       {NotAuthorized: "1520", InvalidToken: "1530", InvalidRequest: "1540", NotImplemented: "1560", ServiceFailure: "1580"},
	"CNRead.search":            {NotAuthorized: "4280", NotImplemented: "4281", InvalidToken: "4290", InvalidRequest: "4300", ServiceFailure: "4310"},
	"CNRead.synchronize":       {NotImplemented: "4960", ServiceFailure: "4961", NotAuthorized: "4962", InvalidToken: "4963", InvalidRequest: "0"},
	// CN authorization
	"CNAuthorization.isAuthorized":    {ServiceFailure: "1760", InvalidRequest: "1761", NotImplemented: "1780", NotFound: "1800", NotAuthorized: "1820", InvalidToken: "1840"},
	"CNAuthorization.setRightsHolder": {NotAuthorized: "4440", NotImplemented: "4441", InvalidRequest: "4442", VersionMismatch: "4443", NotFound: "4460", InvalidToken: "4480", ServiceFailure: "4490"},
	"CNAuthorization.setAccessPolicy": {NotFound: "4400", NotImplemented: "4401", InvalidRequest: "4402", VersionMismatch: "4403", InvalidToken: "4410", NotAuthorized: "4420", ServiceFailure: "4430"},
	// CN replication
	"CNReplication.setReplicationStatus":      {ServiceFailure: "4700", NotImplemented: "4701", InvalidToken: "4710", NotAuthorized: "4720", InvalidRequest: "4730", NotFound: "4740"},
	"CNReplication.updateReplicationMetadata": {NotImplemented: "4850", NotAuthorized: "4851", ServiceFailure: "4852", InvalidRequest: "4853", NotFound: "4854", VersionMismatch: "4855", InvalidToken: "4856"},
	"CNReplication.setReplicationPolicy":      {NotImplemented: "4880", NotAuthorized: "4881", ServiceFailure: "4882", InvalidRequest: "4883", NotFound: "4884", InvalidToken: "4885", VersionMismatch: "4886"},
	"CNReplication.isNodeAuthorized":          {NotImplemented: "4870", NotAuthorized: "4871", ServiceFailure: "4872", InvalidRequest: "4873", NotFound: "4874", InvalidToken: "4875"},
	"CNReplication.deleteReplicationMetadata": {NotImplemented: "4950", ServiceFailure: "4951", InvalidRequest: "4952", InvalidToken: "4953", NotAuthorized: "4954", VersionMismatch: "4955", NotFound: "4956"},
	// CN groups served NotImplemented for good (the seed): identity and registration.
	"CNIdentity": {NotImplemented: "0", ServiceFailure: "0"},
	"CNRegister": {NotImplemented: "0", ServiceFailure: "0"},
	"notFound":   {NotFound: "0", ServiceFailure: "0"},
	"notAllowed": {InvalidRequest: "0", ServiceFailure: "0"},
}

// v1Errors adds the kinds an operation may raise on v1 only (the seed: v1 get may
// raise InsufficientResources).
var v1Errors = map[string]codes{
	"MNRead.get": {InsufficientResources: "1002"},
}

// raises reports whether op may raise kind k on the API version.
func raises(op string, version int, k Kind) bool {
	if _, ok := v1Errors[op][k]; ok && version == 1 {
		return true
	}
	_, ok := opErrors[op][k]
	return ok
}

// permitted returns the exception to send for op: e itself when op may raise its
// kind, filled with the default detail code; otherwise the nearest permitted kind
// (a refused credential becomes NotAuthorized, an unknown object InvalidRequest,
// both keeping their description), and failing that a ServiceFailure.
func permitted(op string, version int, e *Exception) *Exception {
	allowed := opErrors[op]
	lookup := func(k Kind) (string, bool) {
		if version == 1 {
			if d, ok := v1Errors[op][k]; ok {
				return d, true
			}
		}
		d, ok := allowed[k]
		return d, ok
	}
	out := *e
	if d, ok := lookup(e.Kind); ok {
		if out.DetailCode == "" {
			out.DetailCode = d
		}
		return &out
	}
	for from, to := range map[Kind]Kind{InvalidToken: NotAuthorized, NotFound: InvalidRequest} {
		if e.Kind == from {
			if d, ok := lookup(to); ok {
				out.Kind, out.DetailCode = to, d
				return &out
			}
		}
	}
	out.Kind, out.DetailCode = ServiceFailure, allowed[ServiceFailure]
	if out.DetailCode == "" {
		out.DetailCode = "0"
	}
	out.Description = "internal error: " + e.Kind.String() + " is not a kind " + op + " may raise: " + e.Description
	return &out
}
