// Package controllers reconciles the PostgreSQL kinds with crossplane-runtime's
// managed reconciler: each kind supplies Observe, Create, Update and Delete in
// SQL, and the reconciler does the rest (finalizer, external-name annotation,
// critical annotations, connection Secret, conditions, Events, polling).
package controllers

import (
	"context"
	"database/sql"
	"net/url"

	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"
	"github.com/crossplane/crossplane-runtime/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/pkg/resource"
	_ "github.com/lib/pq" // the PostgreSQL driver
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"lifecycle.bench/sqlpeer/apis/v1alpha1"
)

// db runs statements on one server. Like the provider it stands in for, it
// opens a connection for every statement (or transaction) and closes it after:
// no pool is kept between reconciles.
type db struct {
	dsn      string
	endpoint string
	port     string
}

func newDB(creds map[string][]byte, database, sslmode string) db {
	endpoint := string(creds[xpv1.ResourceCredentialsSecretEndpointKey])
	port := string(creds[xpv1.ResourceCredentialsSecretPortKey])
	user := url.UserPassword(string(creds[xpv1.ResourceCredentialsSecretUserKey]),
		string(creds[xpv1.ResourceCredentialsSecretPasswordKey]))
	dsn := (&url.URL{Scheme: "postgres", User: user, Host: endpoint + ":" + port, Path: "/" + database,
		RawQuery: url.Values{"sslmode": {sslmode}}.Encode()}).String()
	return db{dsn: dsn, endpoint: endpoint, port: port}
}

// scan runs one query and scans its single row into dest.
func (d db) scan(ctx context.Context, query string, args []any, dest ...any) error {
	conn, err := sql.Open("postgres", d.dsn)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck
	return conn.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// exec runs one statement.
func (d db) exec(ctx context.Context, statement string) error {
	conn, err := sql.Open("postgres", d.dsn)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck
	_, err = conn.ExecContext(ctx, statement)
	return err
}

// execTx runs statements in one transaction, rolled back on the first failure.
func (d db) execTx(ctx context.Context, statements []string) error {
	conn, err := sql.Open("postgres", d.dsn)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, s := range statements {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// details are the connection details published for a role that can log in.
func (d db) details(user, password string) managed.ConnectionDetails {
	return managed.ConnectionDetails{
		xpv1.ResourceCredentialsSecretUserKey:     []byte(user),
		xpv1.ResourceCredentialsSecretPasswordKey: []byte(password),
		xpv1.ResourceCredentialsSecretEndpointKey: []byte(d.endpoint),
		xpv1.ResourceCredentialsSecretPortKey:     []byte(d.port),
	}
}

// connector records the resource's use of its ProviderConfig, then reads the
// config and its Secret (through the manager's cached client) and returns the
// kind's external client.
type connector struct {
	kube  client.Client
	usage resource.Tracker
	build func(kube client.Client, d db) managed.ExternalClient
}

func (c *connector) Connect(ctx context.Context, mg resource.Managed) (managed.ExternalClient, error) {
	if err := c.usage.Track(ctx, mg); err != nil {
		return nil, errors.Wrap(err, "cannot track ProviderConfig usage")
	}
	ref := mg.GetProviderConfigReference()
	if ref == nil {
		return nil, errors.New("no providerConfigRef")
	}
	pc := &v1alpha1.ProviderConfig{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, pc); err != nil {
		return nil, errors.Wrap(err, "cannot get ProviderConfig")
	}
	sref := pc.Spec.Credentials.ConnectionSecretRef
	if sref == nil {
		return nil, errors.New("ProviderConfig does not reference a credentials Secret")
	}
	s := &corev1.Secret{}
	if err := c.kube.Get(ctx, types.NamespacedName{Namespace: sref.Namespace, Name: sref.Name}, s); err != nil {
		return nil, errors.Wrap(err, "cannot get credentials Secret")
	}
	sslmode := "verify-full"
	if pc.Spec.SSLMode != nil {
		sslmode = *pc.Spec.SSLMode
	}
	return c.build(c.kube, newDB(s.Data, pc.Spec.DefaultDatabase, sslmode)), nil
}

// noRows says whether err is the empty result of a single-row query.
func noRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
