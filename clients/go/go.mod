module idemjob.dev/idemjob

go 1.19

require (
	github.com/jackc/pgconn v1.11.0
	github.com/jackc/pgx/v4 v4.15.0
)
