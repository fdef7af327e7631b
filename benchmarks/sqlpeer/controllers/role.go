package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"
	"github.com/crossplane/crossplane-runtime/pkg/meta"
	"github.com/crossplane/crossplane-runtime/pkg/password"
	"github.com/crossplane/crossplane-runtime/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/pkg/resource"
	"github.com/lib/pq"
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"lifecycle.bench/sqlpeer/apis/v1alpha1"
)

// RoleAlwaysUpdate makes Role's Observe report drift on every poll, as the
// provider this peer stands in for does (it compares the observed and wanted
// attributes by pointer, so any attribute set in the spec differs on every
// read). Off by default: the peer compares values.
var RoleAlwaysUpdate = false

type roleExternal struct {
	kube client.Client
	db   db
}

// attribute is one role attribute: its clause keyword and its field.
type attribute struct {
	clause string
	field  func(p *v1alpha1.RolePrivilege) **bool
}

// attributes in the order the clauses are written.
var attributes = []attribute{
	{"SUPERUSER", func(p *v1alpha1.RolePrivilege) **bool { return &p.SuperUser }},
	{"INHERIT", func(p *v1alpha1.RolePrivilege) **bool { return &p.Inherit }},
	{"CREATEDB", func(p *v1alpha1.RolePrivilege) **bool { return &p.CreateDb }},
	{"CREATEROLE", func(p *v1alpha1.RolePrivilege) **bool { return &p.CreateRole }},
	{"LOGIN", func(p *v1alpha1.RolePrivilege) **bool { return &p.Login }},
	{"REPLICATION", func(p *v1alpha1.RolePrivilege) **bool { return &p.Replication }},
	{"BYPASSRLS", func(p *v1alpha1.RolePrivilege) **bool { return &p.BypassRls }},
}

// clauses are the CREATE/ALTER ROLE clauses of the set attributes (LOGIN or NOLOGIN).
func clauses(p v1alpha1.RolePrivilege) []string {
	out := []string{}
	for _, a := range attributes {
		if v := *a.field(&p); v != nil {
			if *v {
				out = append(out, a.clause)
			} else {
				out = append(out, "NO"+a.clause)
			}
		}
	}
	return out
}

func sortedParams(p *[]v1alpha1.RoleConfigurationParameter) []v1alpha1.RoleConfigurationParameter {
	if p == nil {
		return nil
	}
	out := append([]v1alpha1.RoleConfigurationParameter(nil), *p...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sameParams(a, b *[]v1alpha1.RoleConfigurationParameter) bool {
	x, y := sortedParams(a), sortedParams(b)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// password returns the password the spec names (empty when none) and whether
// it differs from the one in the connection Secret already published.
func (e *roleExternal) password(ctx context.Context, cr *v1alpha1.Role) (string, bool, error) {
	ref := cr.Spec.ForProvider.PasswordSecretRef
	if ref == nil {
		return "", false, nil
	}
	s := &corev1.Secret{}
	if err := e.kube.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		return "", false, errors.Wrap(err, "cannot get password secret")
	}
	pw := string(s.Data[ref.Key])
	out := cr.Spec.WriteConnectionSecretToReference
	if out == nil {
		return pw, false, nil
	}
	published := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: out.Namespace, Name: out.Name}, published)
	if resource.IgnoreNotFound(err) != nil {
		return "", false, errors.Wrap(err, "cannot get connection secret")
	}
	return pw, pw != "" && pw != string(published.Data[xpv1.ResourceCredentialsSecretPasswordKey]), nil
}

func (e *roleExternal) Observe(ctx context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	cr := mg.(*v1alpha1.Role)
	var seen v1alpha1.RolePrivilege
	vals := make([]bool, len(attributes))
	var limit int32
	var config []string
	err := e.db.scan(ctx, "SELECT rolsuper, rolinherit, rolcreatedb, rolcreaterole, rolcanlogin, "+
		"rolreplication, rolbypassrls, rolconnlimit, rolconfig FROM pg_roles WHERE rolname = $1",
		[]any{meta.GetExternalName(cr)},
		&vals[0], &vals[1], &vals[2], &vals[3], &vals[4], &vals[5], &vals[6], &limit, pq.Array(&config))
	if noRows(err) {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot select role")
	}
	for i, a := range attributes {
		v := vals[i]
		*a.field(&seen) = &v
	}
	var params *[]v1alpha1.RoleConfigurationParameter
	if len(config) > 0 {
		list := make([]v1alpha1.RoleConfigurationParameter, 0, len(config))
		for _, kv := range config {
			name, value, _ := strings.Cut(kv, "=")
			list = append(list, v1alpha1.RoleConfigurationParameter{Name: name, Value: value})
		}
		params = &list
	}
	cr.Status.AtProvider.ConfigurationParameters = params
	cr.Status.AtProvider.PrivilegesAsClauses = clauses(seen)

	_, pwChanged, err := e.password(ctx, cr)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	cr.SetConditions(xpv1.Available())

	// Late initialization: every attribute left unset takes the server's value.
	want := &cr.Spec.ForProvider
	late := false
	for _, a := range attributes {
		if f := a.field(&want.Privileges); *f == nil {
			*f = *a.field(&seen)
			late = true
		}
	}
	if want.ConnectionLimit == nil {
		want.ConnectionLimit = &limit
		late = true
	}

	upToDate := !pwChanged && *want.ConnectionLimit == limit &&
		strings.Join(clauses(want.Privileges), " ") == strings.Join(clauses(seen), " ") &&
		(want.ConfigurationParameters == nil || sameParams(want.ConfigurationParameters, params))
	return managed.ExternalObservation{
		ResourceExists:          true,
		ResourceLateInitialized: late,
		ResourceUpToDate:        upToDate && !RoleAlwaysUpdate,
	}, nil
}

func (e *roleExternal) Create(ctx context.Context, mg resource.Managed) (managed.ExternalCreation, error) {
	cr := mg.(*v1alpha1.Role)
	cr.SetConditions(xpv1.Creating())
	name := meta.GetExternalName(cr)
	pw, _, err := e.password(ctx, cr)
	if err != nil {
		return managed.ExternalCreation{}, err
	}
	if pw == "" {
		if pw, err = password.Generate(); err != nil {
			return managed.ExternalCreation{}, err
		}
	}
	privs := clauses(cr.Spec.ForProvider.Privileges)
	// Identifiers cannot be bind parameters: they and the password are quoted.
	if err := e.db.exec(ctx, fmt.Sprintf("CREATE ROLE %s PASSWORD %s %s",
		pq.QuoteIdentifier(name), pq.QuoteLiteral(pw), strings.Join(privs, " "))); err != nil {
		return managed.ExternalCreation{}, errors.Wrap(err, "cannot create role")
	}
	cr.Status.AtProvider.PrivilegesAsClauses = privs
	if p := cr.Spec.ForProvider.ConfigurationParameters; p != nil {
		for _, v := range *p {
			if err := e.db.exec(ctx, fmt.Sprintf("ALTER ROLE %s SET %s = %s", pq.QuoteIdentifier(name),
				pq.QuoteIdentifier(v.Name), settingValue(v.Value))); err != nil {
				return managed.ExternalCreation{}, errors.Wrap(err, "cannot set role configuration parameters")
			}
		}
		cr.Status.AtProvider.ConfigurationParameters = p
	}
	return managed.ExternalCreation{ConnectionDetails: e.db.details(name, pw)}, nil
}

// settingValue quotes a SET value; a comma-separated value (a search_path)
// becomes a list of literals.
func settingValue(value string) string {
	parts := strings.Split(value, ",")
	for i, p := range parts {
		parts[i] = pq.QuoteLiteral(strings.TrimSpace(strings.Trim(p, `'"`)))
	}
	return strings.Join(parts, ", ")
}

func (e *roleExternal) Update(ctx context.Context, mg resource.Managed) (managed.ExternalUpdate, error) {
	cr := mg.(*v1alpha1.Role)
	name := pq.QuoteIdentifier(meta.GetExternalName(cr))
	pw, pwChanged, err := e.password(ctx, cr)
	if err != nil {
		return managed.ExternalUpdate{}, err
	}
	if pwChanged {
		if err := e.db.exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", name, pq.QuoteLiteral(pw))); err != nil {
			return managed.ExternalUpdate{}, errors.Wrap(err, "cannot update role")
		}
	}
	// Only the clauses that differ from the last observation are sent.
	seen := map[string]bool{}
	for _, c := range cr.Status.AtProvider.PrivilegesAsClauses {
		seen[c] = true
	}
	want := clauses(cr.Spec.ForProvider.Privileges)
	var changed []string
	for _, c := range want {
		if !seen[c] {
			changed = append(changed, c)
		}
	}
	if len(changed) > 0 {
		if err := e.db.exec(ctx, fmt.Sprintf("ALTER ROLE %s %s", name, strings.Join(changed, " "))); err != nil {
			return managed.ExternalUpdate{}, errors.Wrap(err, "cannot update role")
		}
	}
	cr.Status.AtProvider.PrivilegesAsClauses = want

	if p := cr.Spec.ForProvider.ConfigurationParameters; p != nil &&
		!sameParams(p, cr.Status.AtProvider.ConfigurationParameters) {
		statements := []string{fmt.Sprintf("ALTER ROLE %s RESET ALL", name)}
		for _, v := range *p {
			statements = append(statements, fmt.Sprintf("ALTER ROLE %s SET %s = %s", name,
				pq.QuoteIdentifier(v.Name), settingValue(v.Value)))
		}
		if err := e.db.execTx(ctx, statements); err != nil {
			return managed.ExternalUpdate{}, errors.Wrap(err, "cannot update role")
		}
		cr.Status.AtProvider.ConfigurationParameters = p
	}
	if l := cr.Spec.ForProvider.ConnectionLimit; l != nil {
		if err := e.db.exec(ctx, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", name, *l)); err != nil {
			return managed.ExternalUpdate{}, errors.Wrap(err, "cannot update role")
		}
	}
	if pwChanged {
		return managed.ExternalUpdate{ConnectionDetails: e.db.details(meta.GetExternalName(cr), pw)}, nil
	}
	return managed.ExternalUpdate{}, nil
}

func (e *roleExternal) Delete(ctx context.Context, mg resource.Managed) (managed.ExternalDelete, error) {
	cr := mg.(*v1alpha1.Role)
	cr.SetConditions(xpv1.Deleting())
	err := e.db.exec(ctx, "DROP ROLE IF EXISTS "+pq.QuoteIdentifier(meta.GetExternalName(cr)))
	return managed.ExternalDelete{}, errors.Wrap(err, "cannot drop role")
}

func (e *roleExternal) Disconnect(context.Context) error { return nil }
