package arm

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"regexp"
	"strings"
)

// A collection of the ARM surface lives in a subscription and a resource group; the planners
// know only flat names. The planners' name of a collection is its ARM name in lower case, "--"
// and ten characters of a hash of the subscription and resource group (also in lower case, as
// ARM compares names): "orders--k3v9t2mq4d". Two resource groups may so hold collections of the
// same name, and the operator still recognises them in schedctl. The ARM scope and the name as
// created are kept in the collection's tags under reserved keys (armScopeTag, armNameTag), so a
// listing can give back full ARM ids; the gateway never shows those tags.
const (
	armScopeTag = "resched.armScope"
	armNameTag  = "resched.armName"
)

// collectionName is the rule for ARM collection names here: the planners' names allow letters,
// digits, '-' and '_', and the suffix takes 12 of their 64 characters.
var collectionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,52}$`)

// scope is a subscription and a resource group.
type scope struct {
	Subscription, ResourceGroup string
}

// String is the ARM id of the resource group.
func (s scope) String() string {
	return "/subscriptions/" + s.Subscription + "/resourceGroups/" + s.ResourceGroup
}

// same compares scopes as ARM does, ignoring case.
func (s scope) same(o scope) bool {
	return strings.EqualFold(s.Subscription, o.Subscription) && strings.EqualFold(s.ResourceGroup, o.ResourceGroup)
}

// plannerName is the planners' name of the collection name in s.
func (s scope) plannerName(name string) (string, error) {
	if !collectionName.MatchString(name) {
		return "", fmt.Errorf("jobCollectionName %q: 1 to 52 letters, digits, '-' or '_'", name)
	}
	sum := sha256.Sum256([]byte(strings.ToLower(s.Subscription) + "\n" + strings.ToLower(s.ResourceGroup)))
	suffix := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:10]
	return strings.ToLower(name) + "--" + suffix, nil
}

// parseScope reads an ARM resource group id, as kept in armScopeTag.
func parseScope(id string) (scope, bool) {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	if len(parts) != 4 || !strings.EqualFold(parts[0], "subscriptions") || !strings.EqualFold(parts[2], "resourceGroups") {
		return scope{}, false
	}
	return scope{Subscription: parts[1], ResourceGroup: parts[3]}, true
}

const provider = "/providers/Microsoft.Scheduler"

// collectionID is the ARM id of a collection.
func collectionID(s scope, name string) string {
	return s.String() + provider + "/jobCollections/" + name
}

// jobID is the ARM id of a job.
func jobID(s scope, collection, job string) string {
	return collectionID(s, collection) + "/jobs/" + job
}
