package jobs

import (
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/pfx"
	"github.com/resched/resched/shared/job"
)

// certificates opens the PFX of every ClientCertificate authentication of a definition, as
// Azure Scheduler did at put, so that a PFX that is not base64, or that the password does not
// open, is refused naming its field rather than failing at every fire. It fills in the
// read-only certificate fields the 2016-03-01 API returns (certificateThumbprint,
// certificateSubjectName, certificateExpirationDate).
func certificates(p *job.Properties) error {
	if p.Action == nil {
		return nil
	}
	e := &Error{Status: 400, Code: CodeBadRequest, Message: "the definition is invalid"}
	check := func(at string, spec *job.ActionSpec) {
		if spec.Request == nil || spec.Request.Authentication == nil || spec.Request.Authentication.Type != job.AuthClientCertificate {
			return
		}
		a := spec.Request.Authentication
		if a.Pfx == "" {
			e.Details = append(e.Details, bus.ErrorEntry{Path: at + ".pfx", Message: "is required for ClientCertificate authentication"})
			return
		}
		cert, err := pfx.Decode(a.Pfx, a.Password)
		if err != nil {
			e.Details = append(e.Details, bus.ErrorEntry{Path: at + ".pfx", Message: err.Error()})
			return
		}
		d := pfx.Describe(cert.Leaf)
		a.CertificateThumbprint, a.CertificateSubjectName, a.CertificateExpiration = d.Thumbprint, d.SubjectName, d.Expiration
	}
	check("action.request.authentication", &p.Action.ActionSpec)
	if p.Action.ErrorAction != nil {
		check("action.errorAction.request.authentication", &p.Action.ErrorAction.ActionSpec)
	}
	if len(e.Details) > 0 {
		return e
	}
	return nil
}
