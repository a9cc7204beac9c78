from softnet.cli.main import main

main()
