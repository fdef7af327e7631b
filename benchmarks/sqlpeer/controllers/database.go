package controllers

import (
	"context"
	"fmt"
	"strings"

	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"
	"github.com/crossplane/crossplane-runtime/pkg/meta"
	"github.com/crossplane/crossplane-runtime/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/pkg/resource"
	"github.com/lib/pq"
	"github.com/pkg/errors"

	"lifecycle.bench/sqlpeer/apis/v1alpha1"
)

type databaseExternal struct{ db db }

func (e *databaseExternal) Observe(ctx context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	cr := mg.(*v1alpha1.Database)
	var (
		owner, encoding, collate, ctype, tablespace string
		allow, template                             bool
		limit                                       int
	)
	err := e.db.scan(ctx, "SELECT pg_catalog.pg_get_userbyid(d.datdba), "+
		"pg_catalog.pg_encoding_to_char(d.encoding), d.datcollate, d.datctype, d.datallowconn, "+
		"d.datconnlimit, d.datistemplate, t.spcname FROM pg_database d "+
		"JOIN pg_tablespace t ON d.dattablespace = t.oid WHERE d.datname = $1",
		[]any{meta.GetExternalName(cr)},
		&owner, &encoding, &collate, &ctype, &allow, &limit, &template, &tablespace)
	if noRows(err) {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot select database")
	}
	cr.SetConditions(xpv1.Available())

	// Late initialization first, so that only fields the spec sets can differ.
	want := &cr.Spec.ForProvider
	late := false
	fillString := func(f **string, v string) {
		if *f == nil {
			*f = &v
			late = true
		}
	}
	fillBool := func(f **bool, v bool) {
		if *f == nil {
			*f = &v
			late = true
		}
	}
	fillString(&want.Owner, owner)
	fillString(&want.Encoding, encoding)
	fillString(&want.LCCollate, collate)
	fillString(&want.LCCType, ctype)
	fillString(&want.Tablespace, tablespace)
	fillBool(&want.AllowConnections, allow)
	fillBool(&want.IsTemplate, template)
	if want.ConnectionLimit == nil {
		want.ConnectionLimit = &limit
		late = true
	}
	// The template is only used when the database is created.
	upToDate := *want.Owner == owner && *want.Encoding == encoding && *want.LCCollate == collate &&
		*want.LCCType == ctype && *want.Tablespace == tablespace && *want.AllowConnections == allow &&
		*want.IsTemplate == template && *want.ConnectionLimit == limit
	return managed.ExternalObservation{ResourceExists: true, ResourceLateInitialized: late,
		ResourceUpToDate: upToDate}, nil
}

// identifierOrDefault quotes a name, except the keyword DEFAULT.
func identifierOrDefault(s string) string {
	if s == "DEFAULT" {
		return s
	}
	return pq.QuoteIdentifier(s)
}

// literalOrDefault quotes a string constant, except the keyword DEFAULT.
func literalOrDefault(s string) string {
	if s == "DEFAULT" {
		return s
	}
	return pq.QuoteLiteral(s)
}

func (e *databaseExternal) Create(ctx context.Context, mg resource.Managed) (managed.ExternalCreation, error) {
	cr := mg.(*v1alpha1.Database)
	p := cr.Spec.ForProvider
	var b strings.Builder
	b.WriteString("CREATE DATABASE " + pq.QuoteIdentifier(meta.GetExternalName(cr)))
	if p.Owner != nil {
		b.WriteString(" OWNER " + pq.QuoteIdentifier(*p.Owner))
	}
	if p.Template != nil {
		b.WriteString(" TEMPLATE " + identifierOrDefault(*p.Template))
	}
	if p.Encoding != nil {
		b.WriteString(" ENCODING " + literalOrDefault(*p.Encoding))
	}
	if p.LCCollate != nil {
		b.WriteString(" LC_COLLATE " + literalOrDefault(*p.LCCollate))
	}
	if p.LCCType != nil {
		b.WriteString(" LC_CTYPE " + literalOrDefault(*p.LCCType))
	}
	if p.Tablespace != nil {
		b.WriteString(" TABLESPACE " + identifierOrDefault(*p.Tablespace))
	}
	if p.AllowConnections != nil {
		fmt.Fprintf(&b, " ALLOW_CONNECTIONS %t", *p.AllowConnections)
	}
	if p.ConnectionLimit != nil {
		fmt.Fprintf(&b, " CONNECTION LIMIT %d", *p.ConnectionLimit)
	}
	if p.IsTemplate != nil {
		fmt.Fprintf(&b, " IS_TEMPLATE %t", *p.IsTemplate)
	}
	return managed.ExternalCreation{}, errors.Wrap(e.db.exec(ctx, b.String()), "cannot create database")
}

// Update sets every alterable field the spec names (owner, connection limit,
// allow connections, is template), whichever of them drifted.
func (e *databaseExternal) Update(ctx context.Context, mg resource.Managed) (managed.ExternalUpdate, error) {
	cr := mg.(*v1alpha1.Database)
	p := cr.Spec.ForProvider
	name := pq.QuoteIdentifier(meta.GetExternalName(cr))
	var statements []string
	if p.Owner != nil {
		statements = append(statements, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", name, pq.QuoteIdentifier(*p.Owner)))
	}
	if p.ConnectionLimit != nil {
		statements = append(statements, fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT = %d", name, *p.ConnectionLimit))
	}
	if p.AllowConnections != nil {
		statements = append(statements, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t", name, *p.AllowConnections))
	}
	if p.IsTemplate != nil {
		statements = append(statements, fmt.Sprintf("ALTER DATABASE %s IS_TEMPLATE %t", name, *p.IsTemplate))
	}
	for _, s := range statements {
		if err := e.db.exec(ctx, s); err != nil {
			return managed.ExternalUpdate{}, errors.Wrap(err, "cannot alter database")
		}
	}
	return managed.ExternalUpdate{}, nil
}

func (e *databaseExternal) Delete(ctx context.Context, mg resource.Managed) (managed.ExternalDelete, error) {
	cr := mg.(*v1alpha1.Database)
	err := e.db.exec(ctx, "DROP DATABASE IF EXISTS "+pq.QuoteIdentifier(meta.GetExternalName(cr)))
	return managed.ExternalDelete{}, errors.Wrap(err, "cannot drop database")
}

func (e *databaseExternal) Disconnect(context.Context) error { return nil }
