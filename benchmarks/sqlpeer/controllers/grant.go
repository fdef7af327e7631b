package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"
	"github.com/crossplane/crossplane-runtime/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/pkg/resource"
	"github.com/lib/pq"
	"github.com/pkg/errors"

	"lifecycle.bench/sqlpeer/apis/v1alpha1"
)

type grantExternal struct{ db db }

// shorthands PostgreSQL expands when it stores a database grant.
var shorthands = map[v1alpha1.GrantPrivilege][]string{
	"ALL":            {"CREATE", "TEMPORARY", "CONNECT"},
	"ALL PRIVILEGES": {"CREATE", "TEMPORARY", "CONNECT"},
	"TEMP":           {"TEMPORARY"},
}

// expanded are the privileges as pg_database's ACL lists them, sorted and unique.
func expanded(ps v1alpha1.GrantPrivileges) []string {
	set := map[string]bool{}
	for _, p := range ps {
		if full, ok := shorthands[p]; ok {
			for _, f := range full {
				set[f] = true
			}
		} else {
			set[string(p)] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func joined(ps v1alpha1.GrantPrivileges) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return strings.Join(out, ", ")
}

// membership says whether the grant is of role membership (memberOf) rather than
// of privileges on a database, and rejects a grant that is neither or both.
func membership(p v1alpha1.GrantParameters) (bool, error) {
	if p.Role == nil {
		return false, errors.New("role not passed or could not be resolved")
	}
	if p.MemberOf != nil || p.MemberOfRef != nil || p.MemberOfSelector != nil {
		if p.Database != nil || len(p.Privileges) > 0 {
			return false, errors.New("cannot set privileges or database in the same grant as memberOf")
		}
		if p.MemberOf == nil {
			return false, errors.New("memberOf could not be resolved")
		}
		return true, nil
	}
	if p.Database == nil {
		return false, errors.New("database not passed or could not be resolved")
	}
	if len(p.Privileges) == 0 {
		return false, errors.New("privileges not passed")
	}
	return false, nil
}

func withOption(o *v1alpha1.GrantOption) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf(" WITH %s OPTION", *o)
}

// Observe asks whether the grant exists exactly: the membership with the same
// admin option, or the same set of database privileges with the same grant option.
func (e *grantExternal) Observe(ctx context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	cr := mg.(*v1alpha1.Grant)
	p := cr.Spec.ForProvider
	member, err := membership(p)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	exists := false
	if member {
		admin := p.WithOption != nil && *p.WithOption == v1alpha1.GrantOptionAdmin
		err = e.db.scan(ctx, "SELECT EXISTS(SELECT 1 FROM pg_auth_members m "+
			"JOIN pg_roles g ON m.roleid = g.oid JOIN pg_roles r ON m.member = r.oid "+
			"WHERE r.rolname = $1 AND g.rolname = $2 AND m.admin_option = $3)",
			[]any{*p.Role, *p.MemberOf, admin}, &exists)
	} else {
		grantable := p.WithOption != nil && *p.WithOption == v1alpha1.GrantOptionGrant
		err = e.db.scan(ctx, "SELECT EXISTS(SELECT 1 FROM pg_database d, aclexplode(d.datacl) a "+
			"JOIN pg_roles r ON a.grantee = r.oid "+
			"WHERE d.datname = $1 AND r.rolname = $2 AND a.is_grantable = $3 "+
			"GROUP BY d.datname, r.rolname, a.is_grantable "+
			"HAVING array_agg(a.privilege_type::text ORDER BY a.privilege_type) = $4::text[])",
			[]any{*p.Database, *p.Role, grantable, pq.Array(expanded(p.Privileges))}, &exists)
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot select grant")
	}
	if !exists {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	cr.SetConditions(xpv1.Available())
	// A grant that exists as wanted has nothing to update.
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

// Create revokes then grants in one transaction, so a grant that drifted (a
// privilege more or less, another option) is replaced whole.
func (e *grantExternal) Create(ctx context.Context, mg resource.Managed) (managed.ExternalCreation, error) {
	cr := mg.(*v1alpha1.Grant)
	cr.SetConditions(xpv1.Creating())
	p := cr.Spec.ForProvider
	member, err := membership(p)
	if err != nil {
		return managed.ExternalCreation{}, errors.Wrap(err, "cannot create grant")
	}
	role := pq.QuoteIdentifier(*p.Role)
	var statements []string
	if member {
		group := pq.QuoteIdentifier(*p.MemberOf)
		statements = []string{
			fmt.Sprintf("REVOKE %s FROM %s", group, role),
			fmt.Sprintf("GRANT %s TO %s%s", group, role, withOption(p.WithOption)),
		}
	} else {
		database := pq.QuoteIdentifier(*p.Database)
		privs := joined(p.Privileges)
		statements = []string{
			fmt.Sprintf("REVOKE %s ON DATABASE %s FROM %s", privs, database, role),
			fmt.Sprintf("GRANT %s ON DATABASE %s TO %s%s", privs, database, role, withOption(p.WithOption)),
		}
		if p.RevokePublicOnDb != nil && *p.RevokePublicOnDb {
			statements = append(statements, fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC", database))
		}
	}
	return managed.ExternalCreation{}, errors.Wrap(e.db.execTx(ctx, statements), "cannot create grant")
}

// Update has nothing to do: Observe reports a grant either exactly there or absent.
func (e *grantExternal) Update(context.Context, resource.Managed) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

func (e *grantExternal) Delete(ctx context.Context, mg resource.Managed) (managed.ExternalDelete, error) {
	cr := mg.(*v1alpha1.Grant)
	cr.SetConditions(xpv1.Deleting())
	p := cr.Spec.ForProvider
	member, err := membership(p)
	if err != nil {
		return managed.ExternalDelete{}, errors.Wrap(err, "cannot revoke grant")
	}
	statement := fmt.Sprintf("REVOKE %s ON DATABASE %s FROM %s", joined(p.Privileges),
		pq.QuoteIdentifier(ptr(p.Database)), pq.QuoteIdentifier(*p.Role))
	if member {
		statement = fmt.Sprintf("REVOKE %s FROM %s", pq.QuoteIdentifier(*p.MemberOf), pq.QuoteIdentifier(*p.Role))
	}
	return managed.ExternalDelete{}, errors.Wrap(e.db.exec(ctx, statement), "cannot revoke grant")
}

func (e *grantExternal) Disconnect(context.Context) error { return nil }

func ptr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
