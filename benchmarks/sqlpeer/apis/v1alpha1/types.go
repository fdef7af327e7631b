package v1alpha1

import (
	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ---------------------------------------------------------------- Role

// RolePrivilege lists the role attributes of CREATE ROLE; an unset field
// keeps PostgreSQL's default and is filled in from the server after creation.
type RolePrivilege struct {
	// SuperUser sets SUPERUSER (true) or NOSUPERUSER (false).
	// +optional
	SuperUser *bool `json:"superUser,omitempty"`
	// CreateDb sets CREATEDB or NOCREATEDB.
	// +optional
	CreateDb *bool `json:"createDb,omitempty"`
	// CreateRole sets CREATEROLE or NOCREATEROLE.
	// +optional
	CreateRole *bool `json:"createRole,omitempty"`
	// Login sets LOGIN or NOLOGIN.
	// +optional
	Login *bool `json:"login,omitempty"`
	// Inherit sets INHERIT or NOINHERIT.
	// +optional
	Inherit *bool `json:"inherit,omitempty"`
	// Replication sets REPLICATION or NOREPLICATION.
	// +optional
	Replication *bool `json:"replication,omitempty"`
	// BypassRls sets BYPASSRLS or NOBYPASSRLS.
	// +optional
	BypassRls *bool `json:"bypassRls,omitempty"`
}

// RoleConfigurationParameter is one ALTER ROLE ... SET name=value setting.
type RoleConfigurationParameter struct {
	// Name of the run-time parameter.
	Name string `json:"name,omitempty"`
	// Value given to it.
	Value string `json:"value,omitempty"`
}

// RoleParameters are the wanted settings of a PostgreSQL role.
type RoleParameters struct {
	// ConnectionLimit of the role; -1 means no limit.
	// +kubebuilder:validation:Minimum=-1
	// +optional
	ConnectionLimit *int32 `json:"connectionLimit,omitempty"`
	// Privileges are the role attributes.
	// +optional
	Privileges RolePrivilege `json:"privileges,omitempty"`
	// PasswordSecretRef names the Secret key holding the role's password; a
	// password is generated when it is unset.
	// +optional
	PasswordSecretRef *xpv1.SecretKeySelector `json:"passwordSecretRef,omitempty"`
	// ConfigurationParameters set on the role; when given, any other setting
	// found on the role is reset.
	// +optional
	ConfigurationParameters *[]RoleConfigurationParameter `json:"configurationParameters,omitempty"`
}

// RoleObservation is what the server last reported about the role.
type RoleObservation struct {
	// PrivilegesAsClauses are the role attributes as CREATE ROLE clauses.
	PrivilegesAsClauses []string `json:"privilegesAsClauses,omitempty"`
	// ConfigurationParameters found on the role.
	ConfigurationParameters *[]RoleConfigurationParameter `json:"configurationParameters,omitempty"`
}

// RoleSpec is the wanted state of a Role.
type RoleSpec struct {
	xpv1.ResourceSpec `json:",inline"`
	ForProvider       RoleParameters `json:"forProvider"`
}

// RoleStatus is the observed state of a Role.
type RoleStatus struct {
	xpv1.ResourceStatus `json:",inline"`
	AtProvider          RoleObservation `json:"atProvider,omitempty"`
}

// Role is a PostgreSQL role; its external name is the role's name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="CONN LIMIT",type="integer",JSONPath=".spec.forProvider.connectionLimit"
// +kubebuilder:resource:scope=Cluster,categories={crossplane,managed,sql}
type Role struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RoleSpec   `json:"spec"`
	Status RoleStatus `json:"status,omitempty"`
}

// RoleList is a list of Roles.
// +kubebuilder:object:root=true
type RoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Role `json:"items"`
}

// ---------------------------------------------------------------- Database

// DatabaseParameters are the wanted settings of a PostgreSQL database; unset
// fields are filled in from the server after creation.
type DatabaseParameters struct {
	// Owner role of the database.
	// +optional
	Owner *string `json:"owner,omitempty"`
	// Template database it is created from (creation only).
	// +optional
	Template *string `json:"template,omitempty"`
	// Encoding of the database, such as UTF8.
	// +optional
	Encoding *string `json:"encoding,omitempty"`
	// LCCollate is the collation order.
	// +optional
	LCCollate *string `json:"lcCollate,omitempty"`
	// LCCType is the character classification.
	// +optional
	LCCType *string `json:"lcCType,omitempty"`
	// Tablespace holding the database.
	// +optional
	Tablespace *string `json:"tablespace,omitempty"`
	// AllowConnections is false to refuse every connection.
	// +optional
	AllowConnections *bool `json:"allowConnections,omitempty"`
	// ConnectionLimit of the database; -1 means no limit.
	// +optional
	ConnectionLimit *int `json:"connectionLimit,omitempty"`
	// IsTemplate marks the database as a template.
	// +optional
	IsTemplate *bool `json:"isTemplate,omitempty"`
}

// DatabaseSpec is the wanted state of a Database.
type DatabaseSpec struct {
	xpv1.ResourceSpec `json:",inline"`
	ForProvider       DatabaseParameters `json:"forProvider"`
}

// DatabaseStatus is the observed state of a Database.
type DatabaseStatus struct {
	xpv1.ResourceStatus `json:",inline"`
}

// Database is a PostgreSQL database; its external name is the database's name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories={crossplane,managed,sql}
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec"`
	Status DatabaseStatus `json:"status,omitempty"`
}

// DatabaseList is a list of Databases.
// +kubebuilder:object:root=true
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

// ---------------------------------------------------------------- Grant

// GrantPrivilege is one privilege keyword, such as CONNECT or ALL.
// +kubebuilder:validation:Pattern:=^[A-Z]+$
type GrantPrivilege string

// GrantPrivileges is a non-empty list of privileges.
// +kubebuilder:validation:MinItems:=1
type GrantPrivileges []GrantPrivilege

// GrantOption is the WITH ... OPTION of a grant.
type GrantOption string

// The grant options.
const (
	GrantOptionAdmin GrantOption = "ADMIN"
	GrantOptionGrant GrantOption = "GRANT"
)

// GrantParameters say who gets what: privileges on a database, or membership
// of another role.
type GrantParameters struct {
	// Privileges granted on the database.
	// +optional
	Privileges GrantPrivileges `json:"privileges,omitempty"`
	// WithOption adds WITH GRANT OPTION or WITH ADMIN OPTION.
	// +kubebuilder:validation:Enum=ADMIN;GRANT
	// +optional
	WithOption *GrantOption `json:"withOption,omitempty"`
	// Role receiving the grant.
	// +optional
	Role *string `json:"role,omitempty"`
	// RoleRef names the Role object receiving the grant.
	// +optional
	RoleRef *xpv1.Reference `json:"roleRef,omitempty"`
	// RoleSelector selects the Role object receiving the grant.
	// +optional
	RoleSelector *xpv1.Selector `json:"roleSelector,omitempty"`
	// Database the privileges are on.
	// +optional
	Database *string `json:"database,omitempty"`
	// DatabaseRef names the Database object the privileges are on.
	// +optional
	DatabaseRef *xpv1.Reference `json:"databaseRef,omitempty"`
	// DatabaseSelector selects the Database object the privileges are on.
	// +optional
	DatabaseSelector *xpv1.Selector `json:"databaseSelector,omitempty"`
	// MemberOf is the role that Role becomes a member of.
	// +optional
	MemberOf *string `json:"memberOf,omitempty"`
	// MemberOfRef names the Role object that Role becomes a member of.
	// +optional
	MemberOfRef *xpv1.Reference `json:"memberOfRef,omitempty"`
	// MemberOfSelector selects the Role object that Role becomes a member of.
	// +optional
	MemberOfSelector *xpv1.Selector `json:"memberOfSelector,omitempty"`
	// RevokePublicOnDb also revokes every privilege of PUBLIC on the database.
	// +optional
	RevokePublicOnDb *bool `json:"revokePublicOnDb,omitempty"`
}

// GrantSpec is the wanted state of a Grant.
type GrantSpec struct {
	xpv1.ResourceSpec `json:",inline"`
	ForProvider       GrantParameters `json:"forProvider"`
}

// GrantStatus is the observed state of a Grant.
type GrantStatus struct {
	xpv1.ResourceStatus `json:",inline"`
}

// Grant is a grant of database privileges or of role membership.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="ROLE",type="string",JSONPath=".spec.forProvider.role"
// +kubebuilder:printcolumn:name="DATABASE",type="string",JSONPath=".spec.forProvider.database"
// +kubebuilder:resource:scope=Cluster,categories={crossplane,managed,sql}
type Grant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GrantSpec   `json:"spec"`
	Status GrantStatus `json:"status,omitempty"`
}

// GrantList is a list of Grants.
// +kubebuilder:object:root=true
type GrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Grant `json:"items"`
}

// ---------------------------------------------------------------- ProviderConfig

// ProviderCredentials point at the Secret holding endpoint, port, username
// and password of the server's admin.
type ProviderCredentials struct {
	// Source of the credentials; only PostgreSQLConnectionSecret.
	// +kubebuilder:validation:Enum=PostgreSQLConnectionSecret
	Source xpv1.CredentialsSource `json:"source"`
	// ConnectionSecretRef is the Secret with the admin's connection details.
	// +optional
	ConnectionSecretRef *xpv1.SecretReference `json:"connectionSecretRef,omitempty"`
}

// ProviderConfigSpec says how to reach a PostgreSQL server.
type ProviderConfigSpec struct {
	// Credentials of the server's admin.
	Credentials ProviderCredentials `json:"credentials"`
	// DefaultDatabase the peer connects to.
	// +kubebuilder:default="postgres"
	// +optional
	DefaultDatabase string `json:"defaultDatabase,omitempty"`
	// SSLMode of the connection.
	// +kubebuilder:validation:Enum=disable;require;verify-ca;verify-full
	// +kubebuilder:default=verify-full
	// +optional
	SSLMode *string `json:"sslMode,omitempty"`
}

// ProviderConfigStatus counts the resources using the config.
type ProviderConfigStatus struct {
	xpv1.ProviderConfigStatus `json:",inline"`
}

// ProviderConfig says which PostgreSQL server the managed kinds act on.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider,sql}
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// ProviderConfigList is a list of ProviderConfigs.
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// ProviderConfigUsage records that one managed resource uses a ProviderConfig.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider,sql}
type ProviderConfigUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	xpv1.ProviderConfigUsage `json:",inline"`
}

// ProviderConfigUsageList is a list of ProviderConfigUsages.
// +kubebuilder:object:root=true
type ProviderConfigUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfigUsage `json:"items"`
}
