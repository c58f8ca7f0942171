package adapter

import (
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// XML namespaces of the DataONE types. Only root elements are qualified.
const (
	NSv1  = "http://ns.dataone.org/service/types/v1"
	NSv11 = "http://ns.dataone.org/service/types/v1.1"
	NSv2  = "http://ns.dataone.org/service/types/v2.0"
)

// Time is an xs:dateTime. It is written in UTC with millisecond precision, as
// DataONE compares at that precision, and omitted when zero. Reading accepts any
// xs:dateTime form, including one without a zone (which means UTC).
type Time struct{ time.Time }

// NewTime truncates t to DataONE's millisecond precision, in UTC.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// Now is the current time at DataONE precision.
func Now() Time { return NewTime(time.Now()) }

// Format renders t the way every document here does.
func (t Time) Format() string { return t.UTC().Format(timeFormat) }

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func (t Time) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	if t.IsZero() {
		return nil
	}
	return e.EncodeElement(t.Format(), start)
}

func (t *Time) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	var s string
	if err := d.DecodeElement(&s, &start); err != nil {
		return err
	}
	p, err := ParseTime(s)
	if err != nil {
		return err
	}
	*t = p
	return nil
}

func (t Time) MarshalXMLAttr(name xml.Name) (xml.Attr, error) {
	if t.IsZero() {
		return xml.Attr{}, nil
	}
	return xml.Attr{Name: name, Value: t.Format()}, nil
}

func (t *Time) UnmarshalXMLAttr(a xml.Attr) error {
	p, err := ParseTime(a.Value)
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// timeLayouts are the forms DataONE peers send: xs:dateTime with or without a zone
// and fraction, a bare date, and RFC 1123 (Metacat accepts it in queries).
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02",
	"2006-01-02Z07:00",
	time.RFC1123,
	time.RFC1123Z,
}

// ParseTime reads an xs:dateTime (or a date) as DataONE peers write it.
func ParseTime(s string) (Time, error) {
	t, err := parseTime(s)
	return NewTime(t), err
}

// ParseBound is ParseTime for a bound of a date range over DataONE dates,
// rounded up to the millisecond: fromDate ≤ d and d < toDate at the dates'
// precision hold exactly when they hold at the bound's own.
func ParseBound(s string) (Time, error) {
	t, err := parseTime(s)
	if t.Truncate(time.Millisecond) != t {
		t = t.Truncate(time.Millisecond).Add(time.Millisecond)
	}
	return NewTime(t), err
}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date-time (expected ISO 8601, e.g. 2024-01-31T12:00:00.000Z)", s)
}

// Permission is an access level; each includes the ones below it.
type Permission string

const (
	PermRead             Permission = "read"
	PermWrite            Permission = "write"
	PermChangePermission Permission = "changePermission"
)

// Level orders permissions: read 1 < write 2 < changePermission 3; unknown 0.
func (p Permission) Level() int {
	switch p {
	case PermRead:
		return 1
	case PermWrite:
		return 2
	case PermChangePermission:
		return 3
	}
	return 0
}

// Symbolic subjects (API.md §7).
const (
	SubjectPublic            = "public"
	SubjectAuthenticatedUser = "authenticatedUser"
	SubjectVerifiedUser      = "verifiedUser"
)

type Checksum struct {
	Algorithm string `xml:"algorithm,attr"`
	Value     string `xml:",chardata"`
}

type AccessRule struct {
	Subject    []string     `xml:"subject"`
	Permission []Permission `xml:"permission"`
}

type AccessPolicy struct {
	Allow []AccessRule `xml:"allow"`
}

type ReplicationPolicy struct {
	ReplicationAllowed  *bool    `xml:"replicationAllowed,attr,omitempty"`
	NumberReplicas      *int     `xml:"numberReplicas,attr,omitempty"`
	PreferredMemberNode []string `xml:"preferredMemberNode"`
	BlockedMemberNode   []string `xml:"blockedMemberNode"`
}

// Replication statuses of a Replica.
const (
	ReplicaQueued      = "queued"
	ReplicaRequested   = "requested"
	ReplicaCompleted   = "completed"
	ReplicaFailed      = "failed"
	ReplicaInvalidated = "invalidated"
)

type Replica struct {
	ReplicaMemberNode string `xml:"replicaMemberNode"`
	ReplicationStatus string `xml:"replicationStatus"`
	ReplicaVerified   Time   `xml:"replicaVerified"`
}

type MediaTypeProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:",chardata"`
}

type MediaType struct {
	Name     string              `xml:"name,attr"`
	Property []MediaTypeProperty `xml:"property"`
}

// SystemMetadata is the v2 system metadata; its v1 view drops the last three fields.
type SystemMetadata struct {
	SerialVersion           uint64             `xml:"serialVersion"`
	Identifier              string             `xml:"identifier"`
	FormatID                string             `xml:"formatId"`
	Size                    uint64             `xml:"size"`
	Checksum                Checksum           `xml:"checksum"`
	Submitter               string             `xml:"submitter,omitempty"`
	RightsHolder            string             `xml:"rightsHolder"`
	AccessPolicy            *AccessPolicy      `xml:"accessPolicy,omitempty"`
	ReplicationPolicy       *ReplicationPolicy `xml:"replicationPolicy,omitempty"`
	Obsoletes               string             `xml:"obsoletes,omitempty"`
	ObsoletedBy             string             `xml:"obsoletedBy,omitempty"`
	Archived                bool               `xml:"archived"`
	DateUploaded            Time               `xml:"dateUploaded"`
	DateSysMetadataModified Time               `xml:"dateSysMetadataModified"`
	OriginMemberNode        string             `xml:"originMemberNode,omitempty"`
	AuthoritativeMemberNode string             `xml:"authoritativeMemberNode,omitempty"`
	Replica                 []Replica          `xml:"replica"`
	SeriesID                string             `xml:"seriesId,omitempty"`
	MediaType               *MediaType         `xml:"mediaType,omitempty"`
	FileName                string             `xml:"fileName,omitempty"`
}

// Clone returns a deep copy, so that callers can change it freely.
func (sm *SystemMetadata) Clone() *SystemMetadata {
	c := *sm
	if sm.AccessPolicy != nil {
		ap := AccessPolicy{Allow: make([]AccessRule, len(sm.AccessPolicy.Allow))}
		for i, r := range sm.AccessPolicy.Allow {
			ap.Allow[i] = AccessRule{Subject: append([]string(nil), r.Subject...), Permission: append([]Permission(nil), r.Permission...)}
		}
		c.AccessPolicy = &ap
	}
	if sm.ReplicationPolicy != nil {
		rp := *sm.ReplicationPolicy
		if rp.ReplicationAllowed != nil {
			v := *rp.ReplicationAllowed
			rp.ReplicationAllowed = &v
		}
		if rp.NumberReplicas != nil {
			n := *rp.NumberReplicas
			rp.NumberReplicas = &n
		}
		rp.PreferredMemberNode = append([]string(nil), rp.PreferredMemberNode...)
		rp.BlockedMemberNode = append([]string(nil), rp.BlockedMemberNode...)
		c.ReplicationPolicy = &rp
	}
	c.Replica = append([]Replica(nil), sm.Replica...)
	if sm.MediaType != nil {
		mt := *sm.MediaType
		mt.Property = append([]MediaTypeProperty(nil), mt.Property...)
		c.MediaType = &mt
	}
	return &c
}

// Slice is the paging header of ObjectList, Log and ObjectFormatList.
type Slice struct {
	Count int `xml:"count,attr"`
	Start int `xml:"start,attr"`
	Total int `xml:"total,attr"`
}

type ObjectInfo struct {
	Identifier              string   `xml:"identifier"`
	FormatID                string   `xml:"formatId"`
	Checksum                Checksum `xml:"checksum"`
	DateSysMetadataModified Time     `xml:"dateSysMetadataModified"`
	Size                    uint64   `xml:"size"`
}

// ObjectList exists only in the v1 namespace, on v1 and v2 alike.
type ObjectList struct {
	Slice
	ObjectInfo []ObjectInfo `xml:"objectInfo"`
}

// Events of the v1 log; v2 accepts any non-empty string.
const (
	EventCreate                = "create"
	EventRead                  = "read"
	EventUpdate                = "update"
	EventDelete                = "delete"
	EventReplicate             = "replicate"
	EventSynchronizationFailed = "synchronization_failed"
	EventReplicationFailed     = "replication_failed"
)

// V1Events is the closed event enumeration of the v1 schema.
var V1Events = []string{EventCreate, EventRead, EventUpdate, EventDelete, EventReplicate, EventSynchronizationFailed, EventReplicationFailed}

type LogEntry struct {
	EntryID        string `xml:"entryId"`
	Identifier     string `xml:"identifier"`
	IPAddress      string `xml:"ipAddress"`
	UserAgent      string `xml:"userAgent"`
	Subject        string `xml:"subject"`
	Event          string `xml:"event"`
	DateLogged     Time   `xml:"dateLogged"`
	NodeIdentifier string `xml:"nodeIdentifier"`
}

type Log struct {
	Slice
	LogEntry []LogEntry `xml:"logEntry"`
}

type ServiceMethodRestriction struct {
	MethodName string   `xml:"methodName,attr"`
	Subject    []string `xml:"subject"`
}

type Service struct {
	Name        string                     `xml:"name,attr"`
	Version     string                     `xml:"version,attr"`
	Available   *bool                      `xml:"available,attr,omitempty"`
	Restriction []ServiceMethodRestriction `xml:"restriction"`
}

type Services struct {
	Service []Service `xml:"service"`
}

type Schedule struct {
	Hour string `xml:"hour,attr"`
	Mday string `xml:"mday,attr"`
	Min  string `xml:"min,attr"`
	Mon  string `xml:"mon,attr"`
	Sec  string `xml:"sec,attr"`
	Wday string `xml:"wday,attr"`
	Year string `xml:"year,attr"`
}

type Synchronization struct {
	Schedule            Schedule `xml:"schedule"`
	LastHarvested       Time     `xml:"lastHarvested"`
	LastCompleteHarvest Time     `xml:"lastCompleteHarvest"`
}

type NodeReplicationPolicy struct {
	MaxObjectSize       *uint64  `xml:"maxObjectSize,omitempty"`
	SpaceAllocated      *uint64  `xml:"spaceAllocated,omitempty"`
	AllowedNode         []string `xml:"allowedNode"`
	AllowedObjectFormat []string `xml:"allowedObjectFormat"`
}

type Ping struct {
	Success     *bool `xml:"success,attr,omitempty"`
	LastSuccess Time  `xml:"lastSuccess,attr,omitempty"`
}

type Property struct {
	Key   string `xml:"key,attr"`
	Type  string `xml:"type,attr,omitempty"`
	Value string `xml:",chardata"`
}

// Node types and states.
const (
	NodeTypeMN = "mn"
	NodeTypeCN = "cn"
	NodeUp     = "up"
)

// Node is the v2 node document; its v1 view drops Property.
type Node struct {
	Replicate             bool                   `xml:"replicate,attr"`
	Synchronize           bool                   `xml:"synchronize,attr"`
	Type                  string                 `xml:"type,attr"`
	State                 string                 `xml:"state,attr"`
	Identifier            string                 `xml:"identifier"`
	Name                  string                 `xml:"name"`
	Description           string                 `xml:"description"`
	BaseURL               string                 `xml:"baseURL"`
	Services              *Services              `xml:"services,omitempty"`
	Synchronization       *Synchronization       `xml:"synchronization,omitempty"`
	NodeReplicationPolicy *NodeReplicationPolicy `xml:"nodeReplicationPolicy,omitempty"`
	Ping                  *Ping                  `xml:"ping,omitempty"`
	Subject               []string               `xml:"subject"`
	ContactSubject        []string               `xml:"contactSubject"`
	Property              []Property             `xml:"property"`
}

type NodeList struct {
	Node []Node `xml:"node"`
}

// ObjectFormat is the v2 format; its v1 view drops MediaType and Extension.
type ObjectFormat struct {
	FormatID   string     `xml:"formatId"`
	FormatName string     `xml:"formatName"`
	FormatType string     `xml:"formatType"`
	MediaType  *MediaType `xml:"mediaType,omitempty"`
	Extension  string     `xml:"extension,omitempty"`
}

type ObjectFormatList struct {
	Slice
	ObjectFormat []ObjectFormat `xml:"objectFormat"`
}

type ObjectLocation struct {
	NodeIdentifier string   `xml:"nodeIdentifier"`
	BaseURL        string   `xml:"baseURL"`
	Version        []string `xml:"version"`
	URL            string   `xml:"url"`
	Preference     *int     `xml:"preference,omitempty"`
}

type ObjectLocationList struct {
	Identifier     string           `xml:"identifier"`
	ObjectLocation []ObjectLocation `xml:"objectLocation"`
}

// Identifier is the one-value document returned by create, update, delete, archive,
// generateIdentifier and reserveIdentifier.
type Identifier struct {
	Value string `xml:",chardata"`
}

type Person struct {
	Subject            string   `xml:"subject"`
	GivenName          []string `xml:"givenName"`
	FamilyName         string   `xml:"familyName"`
	Email              []string `xml:"email"`
	IsMemberOf         []string `xml:"isMemberOf"`
	EquivalentIdentity []string `xml:"equivalentIdentity"`
	Verified           *bool    `xml:"verified,omitempty"`
}

type Group struct {
	Subject      string   `xml:"subject"`
	GroupName    string   `xml:"groupName"`
	HasMember    []string `xml:"hasMember"`
	RightsHolder []string `xml:"rightsHolder"`
}

type SubjectInfo struct {
	Person []Person `xml:"person"`
	Group  []Group  `xml:"group"`
}

type SubjectList struct {
	Subject []string `xml:"subject"`
}

// SessionDoc is the Session document (whoami).
type SessionDoc struct {
	Subject     string       `xml:"subject"`
	SubjectInfo *SubjectInfo `xml:"subjectInfo,omitempty"`
}

type ChecksumAlgorithmList struct {
	Algorithm []string `xml:"algorithm"`
}

// OptionList lists the themes of MNView (v2 namespace).
type OptionList struct {
	Key         string   `xml:"key,attr"`
	Description string   `xml:"description,attr"`
	Option      []string `xml:"option"`
}

type QueryEngineList struct {
	QueryEngine []string `xml:"queryEngine"`
}
