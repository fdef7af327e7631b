// Package v1alpha1 holds the postgresql.sql.crossplane.io/v1alpha1 kinds the
// peer serves: Role, Database, Grant, ProviderConfig and ProviderConfigUsage,
// with the field names and shapes of the provider users install.
//
// +kubebuilder:object:generate=true
// +groupName=postgresql.sql.crossplane.io
// +versionName=v1alpha1
package v1alpha1

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group and version of every kind in this package.
const (
	Group   = "postgresql.sql.crossplane.io"
	Version = "v1alpha1"
)

var (
	// SchemeGroupVersion is the group and version of these kinds.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the kinds with a runtime scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	// AddToScheme adds every kind of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func kindOf(v any) string { return reflect.TypeOf(v).Name() }

// Group-kinds and group-version-kinds the controllers are keyed by.
var (
	RoleGroupKind                           = schema.GroupKind{Group: Group, Kind: kindOf(Role{})}
	RoleGroupVersionKind                    = SchemeGroupVersion.WithKind(kindOf(Role{}))
	DatabaseGroupKind                       = schema.GroupKind{Group: Group, Kind: kindOf(Database{})}
	DatabaseGroupVersionKind                = SchemeGroupVersion.WithKind(kindOf(Database{}))
	GrantGroupKind                          = schema.GroupKind{Group: Group, Kind: kindOf(Grant{})}
	GrantGroupVersionKind                   = SchemeGroupVersion.WithKind(kindOf(Grant{}))
	ProviderConfigGroupKind                 = schema.GroupKind{Group: Group, Kind: kindOf(ProviderConfig{})}
	ProviderConfigGroupVersionKind          = SchemeGroupVersion.WithKind(kindOf(ProviderConfig{}))
	ProviderConfigUsageListGroupVersionKind = SchemeGroupVersion.WithKind(kindOf(ProviderConfigUsageList{}))
)

func init() {
	SchemeBuilder.Register(&Role{}, &RoleList{}, &Database{}, &DatabaseList{}, &Grant{}, &GrantList{},
		&ProviderConfig{}, &ProviderConfigList{}, &ProviderConfigUsage{}, &ProviderConfigUsageList{})
}
