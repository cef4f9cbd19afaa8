package arm

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

// armCollection is a job collection as ARM answers it.
type armCollection struct {
	ID         string                   `json:"id"`
	Type       string                   `json:"type"`
	Name       string                   `json:"name"`
	Location   string                   `json:"location,omitempty"`
	Tags       map[string]string        `json:"tags,omitempty"`
	Properties job.CollectionProperties `json:"properties"`
}

const collectionType = "Microsoft.Scheduler/jobCollections"

// toARM turns a planner's collection into its ARM form; ok is false for a collection that was
// not made through the gateway (no ARM scope of its own).
func toARM(c job.Collection) (armCollection, scope, bool) {
	s, ok := parseScope(c.Tags[armScopeTag])
	name := c.Tags[armNameTag]
	if !ok || name == "" {
		return armCollection{}, scope{}, false
	}
	tags := map[string]string{}
	for k, v := range c.Tags {
		if k != armScopeTag && k != armNameTag {
			tags[k] = v
		}
	}
	if len(tags) == 0 {
		tags = nil
	}
	return armCollection{ID: collectionID(s, name), Type: collectionType, Name: name, Location: c.Location, Tags: tags,
		Properties: c.Properties}, s, true
}

// plannerCollection is the planners' name of the path's collection.
func (c *call) plannerCollection() (string, error) {
	name, err := c.scope().plannerName(c.vars["c"])
	if err != nil {
		return "", badRequest("%v", err)
	}
	return name, nil
}

// collection reads the path's collection; a collection of another scope is not found.
func (s *Server) collection(c *call) (job.Collection, string, error) {
	pname, err := c.plannerCollection()
	if err != nil {
		return job.Collection{}, "", err
	}
	var coll job.Collection
	if _, err := s.planners.call(c.ctx, nil, &coll, "collections", "get", pname); err != nil {
		return job.Collection{}, "", s.named(err, "job collection", c.vars["c"])
	}
	if _, sc, ok := toARM(coll); !ok || !sc.same(c.scope()) {
		return job.Collection{}, "", notFound("the job collection %s was not found in resource group %s", c.vars["c"], c.vars["rg"])
	}
	return coll, pname, nil
}

// named gives a planner's 404 the ARM resource's name rather than the planners' one.
func (s *Server) named(err error, kind, name string) error {
	if e, ok := err.(*apiError); ok && e.Status == http.StatusNotFound {
		return notFound("the %s %s was not found", kind, name)
	}
	return err
}

func (s *Server) getCollection(c *call) error {
	coll, _, err := s.collection(c)
	if err != nil {
		return err
	}
	out, _, _ := toARM(coll)
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) putCollection(c *call) error {
	in, err := s.decodeCollection(c.body)
	if err != nil {
		return err
	}
	return s.storeCollection(c, in)
}

// decodeCollection checks a collection's body as the planners do before the gateway reads it,
// so a field the model does not hold (a misspelt one) or would read as absent (an interval of
// 0) is refused, named, rather than dropped or given its default.
func (s *Server) decodeCollection(raw []byte) (job.Collection, error) {
	coll, err := s.collections.DecodeCollection(raw)
	var verr *jobschema.ValidationError
	if errors.As(err, &verr) {
		e := badRequest("the definition is invalid")
		for _, p := range verr.Problems {
			e.Details = append(e.Details, errorDetail{Code: e.Code, Target: p.Path, Message: p.Message})
		}
		return job.Collection{}, e
	}
	if err != nil {
		return job.Collection{}, badRequest("the body is not a job collection: %v", err)
	}
	return *coll, nil
}

// storeCollection checks what only the gateway knows (the ARM name, the subscription's Free
// collection) and puts the collection with its scope.
func (s *Server) storeCollection(c *call, in job.Collection) error {
	pname, err := c.plannerCollection()
	if err != nil {
		return err
	}
	if in.Name != "" && !strings.EqualFold(in.Name, c.vars["c"]) {
		return badRequest("name %q is not the job collection of the path, %s", in.Name, c.vars["c"])
	}
	for k := range in.Tags {
		if strings.HasPrefix(strings.ToLower(k), "resched.") {
			return badRequest("tags: the tag %q is reserved (resched.* tags are the gateway's)", k)
		}
	}
	if sku := in.Properties.Sku; sku != nil && sku.Name == job.SkuFree {
		if err := s.checkOneFree(c, pname); err != nil {
			return err
		}
	}
	if in.Tags == nil {
		in.Tags = map[string]string{}
	}
	in.Tags[armScopeTag], in.Tags[armNameTag] = c.scope().String(), c.vars["c"]
	in.ID, in.Type, in.Name = "", "", ""
	var stored job.Collection
	reply, err := s.planners.call(c.ctx, in, &stored, "collections", "put", pname)
	if err != nil {
		return err
	}
	out, _, _ := toARM(stored)
	writeJSON(c.w, createdStatus(reply), out)
	return nil
}

// checkOneFree refuses a second Free collection in a subscription, as the service did.
func (s *Server) checkOneFree(c *call, pname string) error {
	all, err := s.allCollections(c)
	if err != nil {
		return err
	}
	for _, coll := range all {
		out, sc, ok := toARM(coll)
		if ok && strings.EqualFold(sc.Subscription, c.vars["s"]) && coll.Name != pname &&
			out.Properties.Sku != nil && out.Properties.Sku.Name == job.SkuFree {
			return conflict("The subscription already has a free job collection. Only one free job collection can be created per subscription.")
		}
	}
	return nil
}

func (s *Server) patchCollection(c *call) error {
	coll, _, err := s.collection(c)
	if err != nil {
		return err
	}
	cur, _, _ := toARM(coll)
	merged, err := mergePatch(cur, c.body)
	if err != nil {
		return err
	}
	in, err := s.decodeCollection(merged)
	if err != nil {
		return err
	}
	return s.storeCollection(c, in)
}

func (s *Server) deleteCollection(c *call) error {
	_, pname, err := s.collection(c)
	if err != nil {
		return err
	}
	if _, err := s.planners.call(c.ctx, nil, nil, "collections", "delete", pname); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// setCollectionState enables or disables: 200 and no body, as the clients expect.
func (s *Server) setCollectionState(op string) func(*call) error {
	return func(c *call) error {
		_, pname, err := s.collection(c)
		if err != nil {
			return err
		}
		if _, err := s.planners.call(c.ctx, nil, nil, "collections", op, pname); err != nil {
			return err
		}
		c.w.WriteHeader(http.StatusOK)
		return nil
	}
}

func (s *Server) listCollectionsBySubscription(c *call) error { return s.listCollections(c, "") }

func (s *Server) listCollectionsByResourceGroup(c *call) error {
	return s.listCollections(c, c.vars["rg"])
}

// A page of a collection listing holds the caller's collections found in up to
// collectionsReads of the planners' pages of 1,000, and at least collectionsPage of them unless
// the listing ends first; its nextLink goes on from the planners' cursor. A caller who sees
// few of many collections gets short pages (each with its nextLink), so that no request reads
// every collection of every tenant.
const (
	collectionsPage  = 1000
	collectionsReads = 10
)

// listCollections lists the collections of the subscription (rg "") or of one resource group
// that the caller may see, page by page.
func (s *Server) listCollections(c *call, rg string) error {
	var req any = map[string]int{"top": 1000}
	var cursor struct {
		After string `json:"after"`
	}
	if tok, err := skipToken(c.r); err != nil {
		return err
	} else if tok != nil {
		req = tok
		_ = json.Unmarshal(tok, &cursor)
	}
	value := []armCollection{}
	var next json.RawMessage
	for range collectionsReads {
		var page struct {
			Value    []job.Collection `json:"value"`
			NextLink json.RawMessage  `json:"nextLink"`
		}
		if _, err := s.planners.call(c.ctx, req, &page, "collections", "list"); err != nil {
			return err
		}
		for _, coll := range page.Value {
			if coll.Name <= cursor.After {
				continue // a planner of a release before the cursor starts from the first page
			}
			cursor.After = coll.Name
			out, sc, ok := toARM(coll)
			if !ok || !strings.EqualFold(sc.Subscription, c.vars["s"]) || (rg != "" && !strings.EqualFold(sc.ResourceGroup, rg)) ||
				!c.grant.Covers(sc.Subscription, sc.ResourceGroup) {
				continue
			}
			value = append(value, out)
		}
		next = page.NextLink
		if len(next) == 0 || string(next) == "null" || len(value) >= collectionsPage {
			break
		}
		req = next
	}
	if len(next) > 0 && string(next) != "null" {
		// The gateway's own cursor, the last collection passed: the planners' own may be an
		// offset (a planner of the earlier release), which does not say what was passed.
		next, _ = json.Marshal(map[string]any{"top": 1000, "after": cursor.After})
	}
	writeJSON(c.w, http.StatusOK, listResult(value, s.nextLink(c, next)))
	return nil
}

// allCollections reads every collection of the planners.
func (s *Server) allCollections(c *call) ([]job.Collection, error) {
	all, err := s.planners.client.Collections(c.ctx)
	return all, armError(err, "")
}

// createdStatus is 201 when the planner says it created the resource, else 200.
func createdStatus(reply *nats.Msg) int {
	if reply.Header.Get("Scheduler-Created") == "true" {
		return http.StatusCreated
	}
	return http.StatusOK
}

// mergePatch applies a JSON merge patch (RFC 7386) to the JSON of cur.
func mergePatch(cur any, patch []byte) ([]byte, error) {
	base, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	var doc, p any
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, badRequest("the body is not JSON: %v", err)
	}
	return json.Marshal(merge(doc, p))
}

func merge(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = merge(dm[k], v)
	}
	return dm
}
