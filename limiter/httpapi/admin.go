package httpapi

import "net/http"

// adminRoutes serves the admin API (admin_routes.go).
func (a *API) adminRoutes() http.Handler {
	return http.NotFoundHandler()
}
