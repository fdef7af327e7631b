package v1alpha1

import (
	"context"
	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"

	"github.com/crossplane/crossplane-runtime/pkg/reference"
	"github.com/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ResolveReferences fills role, database and memberOf from the external names
// of the Role and Database objects that roleRef, databaseRef and memberOfRef
// (or their selectors) point at. The managed reconciler calls it before every
// observe; fields set directly are kept.
func (mg *Grant) ResolveReferences(ctx context.Context, c client.Reader) error {
	r := reference.NewAPIResolver(c, mg)
	p := &mg.Spec.ForProvider
	fields := []struct {
		path     string
		value    **string
		ref      **xpv1.Reference
		selector **xpv1.Selector
		to       reference.To
	}{
		{"spec.forProvider.database", &p.Database, &p.DatabaseRef, &p.DatabaseSelector,
			reference.To{Managed: &Database{}, List: &DatabaseList{}}},
		{"spec.forProvider.role", &p.Role, &p.RoleRef, &p.RoleSelector,
			reference.To{Managed: &Role{}, List: &RoleList{}}},
		{"spec.forProvider.memberOf", &p.MemberOf, &p.MemberOfRef, &p.MemberOfSelector,
			reference.To{Managed: &Role{}, List: &RoleList{}}},
	}
	for _, f := range fields {
		got, err := r.Resolve(ctx, reference.ResolutionRequest{
			CurrentValue: reference.FromPtrValue(*f.value),
			Reference:    *f.ref,
			Selector:     *f.selector,
			To:           f.to,
			Extract:      reference.ExternalName(),
		})
		if err != nil {
			return errors.Wrap(err, f.path)
		}
		*f.value = reference.ToPtrValue(got.ResolvedValue)
		*f.ref = got.ResolvedReference
	}
	return nil
}
