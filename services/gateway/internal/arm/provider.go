package arm

import "net/http"

// getProvider answers the provider's registration, which PowerShell reads before a call: always
// registered (a client told otherwise tries to register it).
func (s *Server) getProvider(c *call) error {
	writeJSON(c.w, http.StatusOK, map[string]any{
		"id":                "/subscriptions/" + c.vars["s"] + "/providers/Microsoft.Scheduler",
		"namespace":         "Microsoft.Scheduler",
		"registrationState": "Registered",
		"resourceTypes": []map[string]any{
			{"resourceType": "jobCollections", "locations": []string{}, "apiVersions": []string{APIVersion}},
		},
	})
	return nil
}

// getResourceGroup answers PowerShell's check that a resource group exists. Resource groups are
// not resources here, only scope: any resource group the caller may use exists.
func (s *Server) getResourceGroup(c *call) error {
	if c.r.Method == http.MethodHead {
		c.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(c.w, http.StatusOK, map[string]any{
		"id": scope{c.vars["s"], c.vars["rg"]}.String(), "name": c.vars["rg"],
		"properties": map[string]string{"provisioningState": "Succeeded"},
	})
	return nil
}
