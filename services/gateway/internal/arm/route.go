package arm

import (
	"net/http"
	"strings"
)

// route is one operation: a method and a path pattern whose "{name}" segments capture values.
// ARM paths are case-insensitive (PowerShell writes "resourcegroups"), so literal segments are
// compared ignoring case; ServeMux patterns cannot do that.
type route struct {
	name     string // for logs and metrics: "Jobs_Get"
	method   string
	segments []string
	write    bool // changes something: refused to a reader
	handle   func(*call) error
}

// match reports whether method and path are this route's, and the captured values.
func (rt route) match(method string, path []string) (map[string]string, bool) {
	if len(path) != len(rt.segments) || (method != rt.method && !(rt.method == http.MethodGet && method == http.MethodHead)) {
		return nil, false
	}
	vars := map[string]string{}
	for i, seg := range rt.segments {
		if strings.HasPrefix(seg, "{") {
			if path[i] == "" {
				return nil, false
			}
			vars[strings.Trim(seg, "{}")] = path[i]
			continue
		}
		if !strings.EqualFold(seg, path[i]) {
			return nil, false
		}
	}
	return vars, true
}

// pathMatches reports whether some route has this path, whatever its method.
func pathMatches(routes []route, path []string) bool {
	for _, rt := range routes {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodPost} {
			if rt.method == m {
				if _, ok := rt.match(m, path); ok {
					return true
				}
			}
		}
	}
	return false
}

func splitPath(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

const (
	rgPath   = "subscriptions/{s}/resourceGroups/{rg}"
	collPath = rgPath + "/providers/Microsoft.Scheduler/jobCollections/{c}"
	jobPath  = collPath + "/jobs/{j}"
)

// routes are the operations of the 2016-03-01 swagger, and the two PowerShell makes beside them.
func (s *Server) routeTable() []route {
	r := func(name, method, pattern string, write bool, h func(*call) error) route {
		return route{name: name, method: method, segments: splitPath(pattern), write: write, handle: h}
	}
	return []route{
		r("Providers_Get", http.MethodGet, "subscriptions/{s}/providers/Microsoft.Scheduler", false, s.getProvider),
		r("ResourceGroups_Get", http.MethodGet, rgPath, false, s.getResourceGroup),
		r("JobCollections_ListBySubscription", http.MethodGet, "subscriptions/{s}/providers/Microsoft.Scheduler/jobCollections", false, s.listCollectionsBySubscription),
		r("JobCollections_ListByResourceGroup", http.MethodGet, rgPath+"/providers/Microsoft.Scheduler/jobCollections", false, s.listCollectionsByResourceGroup),
		r("JobCollections_Get", http.MethodGet, collPath, false, s.getCollection),
		r("JobCollections_CreateOrUpdate", http.MethodPut, collPath, true, s.putCollection),
		r("JobCollections_Patch", http.MethodPatch, collPath, true, s.patchCollection),
		r("JobCollections_Delete", http.MethodDelete, collPath, true, s.deleteCollection),
		r("JobCollections_Enable", http.MethodPost, collPath+"/enable", true, s.setCollectionState("enable")),
		r("JobCollections_Disable", http.MethodPost, collPath+"/disable", true, s.setCollectionState("disable")),
		r("Jobs_List", http.MethodGet, collPath+"/jobs", false, s.listJobs),
		r("Jobs_Get", http.MethodGet, jobPath, false, s.getJob),
		r("Jobs_CreateOrUpdate", http.MethodPut, jobPath, true, s.putJob),
		r("Jobs_Patch", http.MethodPatch, jobPath, true, s.patchJob),
		r("Jobs_Delete", http.MethodDelete, jobPath, true, s.deleteJob),
		r("Jobs_Run", http.MethodPost, jobPath+"/run", true, s.runJob),
		r("Jobs_ListJobHistory", http.MethodGet, jobPath+"/history", false, s.listHistory),
	}
}
