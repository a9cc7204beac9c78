from softnet.cli.entry import main

main()
