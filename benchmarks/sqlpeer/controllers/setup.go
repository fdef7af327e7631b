package controllers

import (
	"time"

	xpcontroller "github.com/crossplane/crossplane-runtime/pkg/controller"
	"github.com/crossplane/crossplane-runtime/pkg/event"
	"github.com/crossplane/crossplane-runtime/pkg/feature"
	"github.com/crossplane/crossplane-runtime/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/pkg/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"lifecycle.bench/sqlpeer/apis/v1alpha1"
)

// Concurrency is the number of concurrent reconciles of each managed kind.
const Concurrency = 5

// CreationGracePeriod is how long after a successful Create an Observe that
// finds nothing is not trusted (the object is requeued instead of created
// again or, when deleted, let go). The managed reconciler's default is 30 s.
var CreationGracePeriod = 30 * time.Second

// Setup adds the ProviderConfig controller and one managed controller per kind.
func Setup(mgr ctrl.Manager, o xpcontroller.Options) error {
	if err := setupConfig(mgr, o); err != nil {
		return err
	}
	kinds := []struct {
		gk    schema.GroupKind
		gvk   schema.GroupVersionKind
		obj   client.Object
		build func(client.Client, db) managed.ExternalClient
	}{
		{v1alpha1.RoleGroupKind, v1alpha1.RoleGroupVersionKind, &v1alpha1.Role{},
			func(k client.Client, d db) managed.ExternalClient { return &roleExternal{kube: k, db: d} }},
		{v1alpha1.DatabaseGroupKind, v1alpha1.DatabaseGroupVersionKind, &v1alpha1.Database{},
			func(_ client.Client, d db) managed.ExternalClient { return &databaseExternal{db: d} }},
		{v1alpha1.GrantGroupKind, v1alpha1.GrantGroupVersionKind, &v1alpha1.Grant{},
			func(_ client.Client, d db) managed.ExternalClient { return &grantExternal{db: d} }},
	}
	for _, k := range kinds {
		name := managed.ControllerName(k.gk.String())
		usage := resource.NewProviderConfigUsageTracker(mgr.GetClient(), &v1alpha1.ProviderConfigUsage{})
		options := []managed.ReconcilerOption{
			managed.WithExternalConnecter(&connector{kube: mgr.GetClient(), usage: usage, build: k.build}),
			managed.WithLogger(o.Logger.WithValues("controller", name)),
			managed.WithPollInterval(o.PollInterval),
			managed.WithCreationGracePeriod(CreationGracePeriod),
			managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))),
		}
		if o.Features.Enabled(feature.EnableBetaManagementPolicies) {
			options = append(options, managed.WithManagementPolicies())
		}
		r := managed.NewReconciler(mgr, resource.ManagedKind(k.gvk), options...)
		if err := ctrl.NewControllerManagedBy(mgr).Named(name).For(k.obj).
			WithOptions(controller.Options{MaxConcurrentReconciles: Concurrency}).
			Complete(r); err != nil {
			return err
		}
	}
	return nil
}

// setupConfig adds the controller that counts a ProviderConfig's users and
// keeps it from being deleted while resources use it.
func setupConfig(mgr ctrl.Manager, o xpcontroller.Options) error {
	name := providerconfig.ControllerName(v1alpha1.ProviderConfigGroupKind.String())
	kinds := resource.ProviderConfigKinds{
		Config:    v1alpha1.ProviderConfigGroupVersionKind,
		UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind,
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).
		For(&v1alpha1.ProviderConfig{}).
		Watches(&v1alpha1.ProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{}).
		Complete(providerconfig.NewReconciler(mgr, kinds,
			providerconfig.WithLogger(o.Logger.WithValues("controller", name)),
			providerconfig.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name)))))
}
