package admin

import (
	_ "embed"
	"net/http"
)

// openapiDoc describes every endpoint; TestOpenAPIMatchesRoutes holds it to
// the route table.
//
//go:embed openapi.json
var openapiDoc []byte

// GET /api/openapi.json
func (a *API) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, err := w.Write(openapiDoc)
	return err
}
