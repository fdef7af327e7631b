// Command sqlpeer manages PostgreSQL roles, databases and grants from
// postgresql.sql.crossplane.io/v1alpha1 objects, on crossplane-runtime's
// managed reconciler. It runs as a plain process against the API server its
// kubeconfig names, without leader election, and prints "ready" on stdout
// once its caches have synced.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	xpcontroller "github.com/crossplane/crossplane-runtime/pkg/controller"
	"github.com/crossplane/crossplane-runtime/pkg/feature"
	"github.com/crossplane/crossplane-runtime/pkg/logging"
	"github.com/crossplane/crossplane-runtime/pkg/ratelimiter"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"lifecycle.bench/sqlpeer/apis/v1alpha1"
	"lifecycle.bench/sqlpeer/controllers"
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on the default one.
	flag := flag.NewFlagSet("sqlpeer", flag.ExitOnError)
	var (
		kubeconfig   = flag.String("kubeconfig", "", "Path of the kubeconfig of the API server (required).")
		poll         = flag.Duration("poll", 10*time.Minute, "How often each resource is checked for drift.")
		sync         = flag.Duration("sync", time.Hour, "How often the informers resync every resource.")
		rate         = flag.Int("max-reconcile-rate", 10, "The global maximum rate per second of reconciles.")
		userAgent    = flag.String("user-agent", "sqlpeer", "The User-Agent of every API request.")
		metrics      = flag.String("metrics-bind-address", "0", "Address of the metrics endpoint; 0 turns it off.")
		debug        = flag.Bool("debug", false, "Log at debug level.")
		alwaysUpdate = flag.Bool("role-always-update", false,
			"Report every Role as drifted on every poll, as the provider this peer stands in for does.")
		policies = flag.Bool("enable-management-policies", true, "Honour spec.managementPolicies.")
		grace    = flag.Duration("creation-grace-period", controllers.CreationGracePeriod,
			"How long after a Create an Observe that finds nothing is requeued, not trusted.")
	)
	_ = flag.Parse(os.Args[1:])
	if *kubeconfig == "" {
		fail("--kubeconfig is required")
	}
	controllers.RoleAlwaysUpdate = *alwaysUpdate
	controllers.CreationGracePeriod = *grace

	zl := zap.New(zap.UseDevMode(*debug))
	log := logging.NewLogrLogger(zl.WithName("sqlpeer"))
	if *debug {
		ctrl.SetLogger(zl)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("cannot read the kubeconfig: %v", err)
	}
	cfg.UserAgent = *userAgent

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:         false,
		Cache:                  cache.Options{SyncPeriod: sync},
		Metrics:                metricsserver.Options{BindAddress: *metrics},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fail("cannot create the controller manager: %v", err)
	}
	if err := v1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
		fail("cannot register the kinds: %v", err)
	}
	o := xpcontroller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: *rate,
		PollInterval:            *poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(*rate),
		Features:                &feature.Flags{},
	}
	if *policies {
		o.Features.Enable(feature.EnableBetaManagementPolicies)
	}
	if err := controllers.Setup(mgr, o); err != nil {
		fail("cannot set up the controllers: %v", err)
	}
	// Announce readiness once the informers the controllers started have synced.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			fmt.Println("ready")
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		fail("cannot add the readiness announcer: %v", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail("the controller manager stopped: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sqlpeer: "+format+"\n", args...)
	os.Exit(1)
}
